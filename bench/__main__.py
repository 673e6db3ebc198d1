"""``make bench``: every benchmark, one table each. Ratios against same-run baselines."""

from bench import burst_bench, gateway_bench, guard_bench, llm_client_bench, stickiness_bench

guard_bench.main()
gateway_bench.main()
llm_client_bench.main()
stickiness_bench.main()
burst_bench.main()
