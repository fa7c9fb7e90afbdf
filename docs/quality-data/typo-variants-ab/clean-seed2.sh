# One A/B run (docs/quality.md "Variants corrected too"), by docs/perf/ab.sh with $V and $ROUND set.
mkdir -p /tmp/ab-typo
for ds in cacm scifact; do
  .venv/bin/hybridsearch bench ../shared/datasets/$ds --modes default --fuzzy --no-start > /tmp/ab-typo/$V-clean-$ds.txt 2>&1
  .venv/bin/hybridsearch bench ../shared/datasets/$ds --modes default --typos 2 --fuzzy --no-start > /tmp/ab-typo/$V-seed2-$ds.txt 2>&1
done
