package main

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// sample is the runtime process's counters at one point.
type sample struct {
	cpu    time.Duration // user + system, this process (getrusage)
	allocs uint64        // Go heap allocations (runtime.MemStats.Mallocs)
	rssKiB int64
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// settle collects garbage and returns memory to the OS, so that RSS
// growth is measured from a clean base, then resets the RSS high-water mark.
func settle() {
	runtime.GC()
	debug.FreeOSMemory()
	resetPeakRSS()
}

func takeSample() sample {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return sample{cpu: cpuTime(), allocs: ms.Mallocs, rssKiB: statusKiB("self", "VmRSS")}
}

// resetPeakRSS resets VmHWM (Linux 4.0+: writing 5 to clear_refs).
func resetPeakRSS() {
	_ = os.WriteFile("/proc/self/clear_refs", []byte("5"), 0)
}

// statusKiB reads one "Name:   N kB" line of /proc/<pid>/status.
func statusKiB(pid, name string) int64 {
	f, err := os.Open(filepath.Join("/proc", pid, "status"))
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name+":"); ok {
			n, _ := strconv.ParseInt(strings.Fields(v)[0], 10, 64)
			return n
		}
	}
	return 0
}

// procCPU is the CPU time a process's live threads have used, from the
// scheduler's nanosecond counters (/proc/<pid>/task/*/schedstat).
func procCPU(pid int) time.Duration {
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/schedstat", pid))
	var ns int64
	for _, t := range tasks {
		b, err := os.ReadFile(t)
		if err != nil {
			continue
		}
		if f := strings.Fields(string(b)); len(f) > 0 {
			v, _ := strconv.ParseInt(f[0], 10, 64)
			ns += v
		}
	}
	return time.Duration(ns)
}

// percentile of sorted values (nearest rank).
func percentile(sorted []float64, p float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	i := int(float64(len(sorted)-1)*p + 0.5)
	return sorted[i]
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// latencyStats fills the latency fields of r from per-op latencies in µs.
func latencyStats(r *roundResult, lat []float64) {
	s := append([]float64(nil), lat...)
	sort.Float64s(s)
	r.Ops = len(s)
	r.P50us = percentile(s, 0.50)
	r.P99us = percentile(s, 0.99)
	var sum float64
	for _, v := range s {
		sum += v
	}
	if len(s) > 0 {
		r.MeanUs = sum / float64(len(s))
	}
}

// counters fills the per-op CPU, allocation and RSS fields of r.
func counters(r *roundResult, before, after sample, ops int) {
	if ops == 0 {
		return
	}
	r.CPUusPerOp = float64((after.cpu - before.cpu).Microseconds()) / float64(ops)
	r.AllocsPerOp = float64(after.allocs-before.allocs) / float64(ops)
	r.RSSGrowthKiB = statusKiB("self", "VmHWM") - before.rssKiB
	if r.RSSGrowthKiB < 0 {
		r.RSSGrowthKiB = 0
	}
}

// pin restricts every thread of this process to the given CPUs (nil: all
// CPUs). Threads and processes started later inherit the mask.
func pin(cpus []int) error {
	var set unix.CPUSet
	if cpus == nil {
		for i := 0; i < runtime.NumCPU(); i++ {
			set.Set(i)
		}
	} else {
		for _, c := range cpus {
			set.Set(c)
		}
	}
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return err
	}
	for _, t := range tasks {
		tid, err := strconv.Atoi(t.Name())
		if err != nil {
			continue
		}
		if err := unix.SchedSetaffinity(tid, &set); err != nil {
			return fmt.Errorf("pin thread %d: %w", tid, err)
		}
	}
	return nil
}

// machine describes where the run happened.
type machine struct {
	CPUs      int       `json:"cpus"`
	Model     string    `json:"cpu_model"`
	Kernel    string    `json:"kernel"`
	GoVersion string    `json:"go_version"`
	Load      []float64 `json:"load_average_start"`
	LoadEnd   []float64 `json:"load_average_end,omitempty"`
}

func loadAverage() []float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return nil
	}
	var out []float64
	for _, f := range strings.Fields(string(b))[:3] {
		v, _ := strconv.ParseFloat(f, 64)
		out = append(out, v)
	}
	return out
}

func describeMachine() machine {
	m := machine{CPUs: runtime.NumCPU(), GoVersion: runtime.Version(), Load: loadAverage()}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(l, "model name"); ok {
				m.Model = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(v), ":"))
				break
			}
		}
	}
	var u unix.Utsname
	if unix.Uname(&u) == nil {
		m.Kernel = unix.ByteSliceToString(u.Release[:])
	}
	return m
}
