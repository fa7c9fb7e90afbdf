"""`hybridsearch loadtest`: a load generator for the gateway over real loopback gRPC.

Open loop (arrivals on a schedule, latency measured from the scheduled send time, so a slow server
cannot hide its queueing), closed loop (N workers), a ramp that finds the knee, a writer for the
"queries while writing" scenario, HDR histograms, plots. docs/performance.md explains the method.

Modules, one concern each: bounds (what may be targeted, hard limits), arrivals (schedules),
recorder (histograms, codes, per-second series), drivers (open and closed loop over any async call),
calls (gRPC calls turned into outcomes), scenarios (which requests), writer (documents to upsert),
ramp (steps and the knee), memory (RSS sampling), session (one command's runs), report (JSON and
console), plots (PNGs).
"""
