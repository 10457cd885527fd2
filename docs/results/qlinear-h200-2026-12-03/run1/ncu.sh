#!/bin/bash
cd "$(dirname "$0")"
O=$OUT
gunzip -f kiln.gz 2>/dev/null; chmod +x kiln
NCU=$(which ncu || ls /usr/local/cuda*/bin/ncu | head -1)
S="--section SpeedOfLight --section Occupancy --section WarpStateStats --section SchedulerStats --section LaunchStats --section MemoryWorkloadAnalysis --section InstructionStats --section ComputeWorkloadAnalysis --section SourceCounters"
timeout 200 $NCU $S -k regex:qlinear -c 1 ./kiln bench --backend cuda --kernel qlinear_4bit --dtype bf16 --runs 2 --shape "g64 1x4096->128256" > $O/ncu-lmhead.txt 2>&1
timeout 150 $NCU $S -k regex:qlinear -c 1 ./kiln bench --backend cuda --kernel qlinear_4bit --dtype bf16 --runs 2 --shape "g64 1x4096->4096" > $O/ncu-4096.txt 2>&1
ls -la $O
