# One A/B run (docs/quality.md "Variants corrected too"), by docs/perf/ab.sh with $V and $ROUND set.
mkdir -p /tmp/ab-typo
for ds in cacm scifact; do
  .venv/bin/hybridsearch bench ../shared/datasets/$ds --modes hybrid,default --typos 1 --fuzzy --no-start \
    > /tmp/ab-typo/$V-$ROUND-$ds.txt 2>&1
  echo "$V r$ROUND $ds: $(grep -E '^\| *(hybrid|default)' /tmp/ab-typo/$V-$ROUND-$ds.txt | tr -s ' ' | head -2 | tr '\n' ' ')"
done
