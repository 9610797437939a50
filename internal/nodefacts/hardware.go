package nodefacts

import (
	"strconv"
	"strings"
)

// memoryScript prints the node's memory as vLLM reads it: NUMA node 0's
// meminfo (vLLM's CPU build reads /sys/devices/system/node/node<N>/meminfo,
// else the system's; vLLM 0.32.0 vllm/utils/cpu_resource_utils.py
// get_memory_node_info), the cgroup's limit and use (v2, else v1), and
// each GPU's total and free memory where nvidia-smi runs. Files and one
// nvidia-smi query: no Python, no packet.
const memoryScript = `echo @@memory
cat /sys/devices/system/node/node0/meminfo 2>/dev/null || cat /proc/meminfo 2>/dev/null
if [ -r /sys/fs/cgroup/memory.max ]; then echo "CgroupLimit: $(cat /sys/fs/cgroup/memory.max) B"; echo "CgroupUsage: $(cat /sys/fs/cgroup/memory.current 2>/dev/null) B"
elif [ -r /sys/fs/cgroup/memory/memory.limit_in_bytes ]; then echo "CgroupLimit: $(cat /sys/fs/cgroup/memory/memory.limit_in_bytes) B"; echo "CgroupUsage: $(cat /sys/fs/cgroup/memory/memory.usage_in_bytes 2>/dev/null) B"; fi
if command -v nvidia-smi >/dev/null 2>&1; then echo @@gpu_memory; nvidia-smi --query-gpu=memory.total,memory.free --format=csv,noheader,nounits 2>/dev/null; fi
`

// Memory is a node's memory as vLLM reads it when it starts.
type Memory struct {
	// Total and Available are vLLM's CPU build's figures: MemTotal, and
	// MemFree + Active(file) + Inactive(file) + SReclaimable, both clamped
	// to the cgroup's limit (available to the limit less the cgroup's use).
	// On a node whose GPUs share the system's memory (a DGX Spark's GB10)
	// these are the GPUs' memory too. 0 when unread.
	Total, Available int64
	// GPUs are nvidia-smi's figures per GPU (bytes); a GPU whose memory
	// nvidia-smi does not report (unified memory: "[N/A]") has Total 0.
	GPUs []GPUMemory
}

// GPUMemory is one GPU's memory.
type GPUMemory struct{ Total, Free int64 }

// parseMemory reads memoryScript's sections. Lines are "Key: value kB" in
// /proc/meminfo and "Node 0 Key: value kB" in a NUMA node's meminfo.
func parseMemory(raw, gpus string) Memory {
	v := map[string]int64{}
	for _, line := range strings.Split(raw, "\n") {
		f := strings.Fields(line)
		if len(f) < 3 {
			continue
		}
		n, err := strconv.ParseInt(f[len(f)-2], 10, 64)
		if err != nil {
			continue
		}
		unit := int64(1)
		if f[len(f)-1] == "kB" {
			unit = 1024
		}
		v[strings.TrimSuffix(f[len(f)-3], ":")] = n * unit
	}
	m := Memory{Total: v["MemTotal"], Available: v["MemFree"] + v["Active(file)"] + v["Inactive(file)"] + v["SReclaimable"]}
	// vLLM 0.32.0 cpu_resource_utils.py: a cgroup limit below the node's
	// total is the total, and what it leaves is the most available. "max"
	// (no limit) does not parse and is skipped.
	if limit, ok := v["CgroupLimit"]; ok && limit > 0 && limit < m.Total {
		m.Total = limit
		m.Available = max(0, min(m.Available, limit-v["CgroupUsage"]))
	}
	for _, line := range strings.Split(strings.TrimSpace(gpus), "\n") {
		total, free, ok := strings.Cut(line, ",")
		if !ok {
			continue
		}
		t, errT := strconv.ParseInt(strings.TrimSpace(total), 10, 64)
		fr, errF := strconv.ParseInt(strings.TrimSpace(free), 10, 64)
		if errT != nil || errF != nil {
			m.GPUs = append(m.GPUs, GPUMemory{}) // "[N/A]": unified memory
			continue
		}
		m.GPUs = append(m.GPUs, GPUMemory{Total: t << 20, Free: fr << 20}) // MiB
	}
	return m
}

// addLinks gives each interface its speed and RDMA devices from the links
// section: "<name> <speed Mb/s, or -1/0> <rdma,devices,>" per line.
func addLinks(ifaces []Interface, raw string) {
	for _, line := range strings.Split(raw, "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		for i := range ifaces {
			if ifaces[i].Name == f[0] {
				setLink(&ifaces[i], f[1:])
			}
		}
	}
}

// setLink reads one links line's speed and RDMA devices into iface.
func setLink(iface *Interface, f []string) {
	if n, err := strconv.Atoi(f[0]); err == nil && n > 0 {
		iface.SpeedMbps = n
	}
	if len(f) > 1 {
		iface.RDMA = append(iface.RDMA, strings.FieldsFunc(f[1], func(r rune) bool { return r == ',' })...)
	}
}
