package selftest

import (
	"os"
	"runtime"
	"strconv"
	"strings"

	"github.com/cipherd/cipherd/kernels"
)

// HostReport describes the machine a measurement ran on.
type HostReport struct {
	kernels.Host
	OS         string `json:"os"`
	GoVersion  string `json:"go_version"`
	GOMAXPROCS int    `json:"gomaxprocs"`
	// CPUQuota is the cgroup CPU limit in cores (1.5 means 150 ms of CPU time
	// per 100 ms); zero means no limit was found.
	CPUQuota float64 `json:"cgroup_cpu_quota,omitempty"`
}

// Host returns the current host's report.
func Host() HostReport {
	return HostReport{
		Host:       kernels.HostInfo(),
		OS:         runtime.GOOS,
		GoVersion:  runtime.Version(),
		GOMAXPROCS: runtime.GOMAXPROCS(0),
		CPUQuota:   cgroupCPUQuota(),
	}
}

// cgroupCPUQuota reads the CPU limit of this process's cgroup: cgroup v2's
// cpu.max, or cgroup v1's cfs quota and period.
func cgroupCPUQuota() float64 {
	if b, err := os.ReadFile("/sys/fs/cgroup/cpu.max"); err == nil {
		if q, ok := parseCPUMax(string(b)); ok {
			return q
		}
		return 0
	}
	quota, err1 := os.ReadFile("/sys/fs/cgroup/cpu/cpu.cfs_quota_us")
	period, err2 := os.ReadFile("/sys/fs/cgroup/cpu/cpu.cfs_period_us")
	if err1 != nil || err2 != nil {
		return 0
	}
	q, ok := parseCPUMax(strings.TrimSpace(string(quota)) + " " + strings.TrimSpace(string(period)))
	if !ok {
		return 0
	}
	return q
}

// parseCPUMax parses "QUOTA PERIOD" in microseconds, where QUOTA may be "max"
// (v2) or negative (v1) for no limit.
func parseCPUMax(s string) (float64, bool) {
	f := strings.Fields(s)
	if len(f) != 2 || f[0] == "max" {
		return 0, false
	}
	quota, err1 := strconv.ParseFloat(f[0], 64)
	period, err2 := strconv.ParseFloat(f[1], 64)
	if err1 != nil || err2 != nil || quota <= 0 || period <= 0 {
		return 0, false
	}
	return quota / period, true
}
