package main

import (
	"context"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/containerd/nri/pkg/api"

	nrirs "github.com/nri-rs/nri-rs/go/adaptation"
)

// The pod-start storm: many pods started at once, as when a node comes up
// or a deployment scales out. Callers, as many as a kubelet runs pod
// workers at once here, each take the next pod and send its events one
// after another, as the kubelet's SyncPod does: RunPodSandbox, then for
// each of its two containers CreateContainer and StartContainer. Every
// plugin spends a fixed time in each CreateContainer (waiting, or
// computing in the CPU-bound variant), so a pod's start is dominated by
// the plugins and the question is how much of that the runtime lets
// overlap: upstream runs one event of one pod at a time; nri-rs does so
// too unless pod concurrency is on.

const (
	// stormCallers is how many pods are being started at any time.
	stormCallers = 8
	// stormBurst is how many pods one configuration starts before the next
	// takes its turn (the configurations of a round run side by side).
	stormBurst = 50
	// stormPodBase keeps the storm's pod ids clear of the other cases'.
	stormPodBase = 100
	// stormEventsPerPod: RunPodSandbox, 2 × (CreateContainer, StartContainer).
	stormEventsPerPod = 5
)

// stormPlugins are the names a storm's plugins register under (as
// startPlugin names them), which WithPodConcurrency is given.
func stormPlugins(n int) []string {
	names := make([]string, n)
	for k := range names {
		names[k] = fmt.Sprintf("%02d-bench%d", 10+k, k)
	}
	return names
}

// stormPod is one pod's requests; the CreateContainer requests are copied
// for each send (upstream's adaptation merges adjustments into them).
type stormPod struct {
	run    *api.RunPodSandboxRequest
	create [2]*api.CreateContainerRequest
	start  [2]*api.StartContainerRequest
}

// stormPod returns pod i's requests, built once.
func (r *requests) stormPod(i int) *stormPod {
	for len(r.storm) <= i {
		k := len(r.storm)
		pod := realisticPod(stormPodBase + k)
		p := &stormPod{run: &api.RunPodSandboxRequest{Pod: pod}}
		for j := range 2 {
			ctr := realisticContainer(pod, 2*(stormPodBase+k)+j)
			if j == 1 {
				ctr.Name = "sidecar"
				ctr.Labels["io.kubernetes.container.name"] = "sidecar"
			}
			p.create[j] = &api.CreateContainerRequest{Pod: pod, Container: ctr}
			p.start[j] = &api.StartContainerRequest{Pod: pod, Container: ctr}
		}
		r.storm = append(r.storm, p)
	}
	return r.storm[i]
}

// copyForSend is the pod's requests with CreateContainer requests of its own.
func (p *stormPod) copyForSend() *stormPod {
	q := *p
	for j := range q.create {
		q.create[j] = clone(p.create[j])
	}
	return &q
}

// stormRun is one configuration's adaptation and plugins in a round.
type stormRun struct {
	c          *caseDef
	impl, stub string
	h          *harness
	in         *instance
	plugins    []*plugin
	next       int // pods sent so far, warm-up included
	probes     int
	lat        []float64 // measured pods' start latencies, µs
	wall       time.Duration
	used       sample
	pluginCPU0 []time.Duration
	stopped    bool
}

func startStorm(h *harness, c *caseDef, impl, stub string) (_ *stormRun, err error) {
	dir, err := h.newDir()
	if err != nil {
		return nil, err
	}
	var extra []nrirs.Option
	if stub == stubGoPods {
		extra = append(extra, nrirs.WithPodConcurrency(stormPlugins(c.Plugins)...))
	}
	in, err := newInstance(impl, dir, false, extra...)
	if err != nil {
		return nil, err
	}
	s := &stormRun{c: c, impl: impl, stub: stub, h: h, in: in}
	defer func() {
		if err != nil {
			s.close()
		}
	}()
	for k := 0; k < c.Plugins; k++ {
		p, err := startPluginArgs(h.bins, stubGo, in.socket, c.Mode, k, false, c.pluginArgs...)
		if err != nil {
			return nil, err
		}
		s.plugins = append(s.plugins, p)
	}
	if err := in.waitSynced(len(s.plugins), 30*time.Second, s.plugins...); err != nil {
		return nil, err
	}
	// Until every plugin shows in a CreateContainer's answer, try again
	// (upstream adds a plugin to its list right after its sync returns).
	probe := h.req.copyFor("create").create
	deadline := time.Now().Add(5 * time.Second)
	for {
		s.probes++
		ctx, cancel := opContext()
		rsp, err := in.rt.CreateContainer(ctx, clone(probe))
		cancel()
		if err != nil {
			return nil, fmt.Errorf("joining: %w", err)
		}
		if len(rsp.GetAdjust().GetEnv()) == c.Plugins {
			break
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("joining: %w", errNotAllPlugins)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := s.burst(c.warmup, false); err != nil {
		return nil, fmt.Errorf("warm-up: %w", err)
	}
	s.pluginCPU0 = make([]time.Duration, len(s.plugins))
	for i, p := range s.plugins {
		s.pluginCPU0[i] = procCPU(p.pid())
	}
	return s, nil
}

// burst starts n more pods, stormCallers at a time, and with record adds
// their latencies, the wall time and the process's CPU and allocations to
// the run's figures.
func (s *stormRun) burst(n int, record bool) error {
	if n == 0 {
		return nil
	}
	pods := make([]*stormPod, n)
	for i := range pods {
		pods[i] = s.h.req.stormPod(s.next + i).copyForSend()
	}
	s.next += n
	lat := make([]float64, n)
	errs := make([]error, n)
	var taken atomic.Int64
	var wg sync.WaitGroup
	before := takeSample()
	t0 := time.Now()
	for range min(stormCallers, n) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(taken.Add(1) - 1)
				if i >= n {
					return
				}
				p0 := time.Now()
				errs[i] = s.startPod(pods[i])
				lat[i] = float64(time.Since(p0).Nanoseconds()) / 1e3
			}
		}()
	}
	wg.Wait()
	wall := time.Since(t0)
	after := takeSample()
	for i, err := range errs {
		if err != nil {
			return fmt.Errorf("pod %d: %w", s.next-n+i, err)
		}
	}
	if record {
		s.lat = append(s.lat, lat...)
		s.wall += wall
		s.used.cpu += after.cpu - before.cpu
		s.used.allocs += after.allocs - before.allocs
	}
	return nil
}

// startPod sends one pod's events in the kubelet's order, each with a
// context of its own as a CRI call has, and checks that every plugin
// adjusted each container.
func (s *stormRun) startPod(p *stormPod) error {
	call := func(f func(ctx context.Context) error) error {
		ctx, cancel := opContext()
		defer cancel()
		return f(ctx)
	}
	rt := s.in.rt
	if err := call(func(ctx context.Context) error { return rt.RunPodSandbox(ctx, p.run) }); err != nil {
		return fmt.Errorf("RunPodSandbox: %w", err)
	}
	for j := range p.create {
		err := call(func(ctx context.Context) error {
			rsp, err := rt.CreateContainer(ctx, p.create[j])
			if err == nil && len(rsp.GetAdjust().GetEnv()) != s.c.Plugins {
				err = fmt.Errorf("%d plugins adjusted the container, want %d", len(rsp.GetAdjust().GetEnv()), s.c.Plugins)
			}
			return err
		})
		if err != nil {
			return fmt.Errorf("CreateContainer %d: %w", j, err)
		}
		if err := call(func(ctx context.Context) error { return rt.StartContainer(ctx, p.start[j]) }); err != nil {
			return fmt.Errorf("StartContainer %d: %w", j, err)
		}
	}
	return nil
}

// finish sets res's figures, checks that every plugin saw every event of
// every pod (and the successful probe), and stops the adaptation.
func (s *stormRun) finish(res *roundResult) error {
	pods := len(s.lat)
	latencyStats(res, s.lat)
	if pods > 0 {
		res.CPUusPerOp = float64(s.used.cpu.Microseconds()) / float64(pods)
		res.AllocsPerOp = float64(s.used.allocs) / float64(pods)
	}
	var pluginCPU []float64
	for i, p := range s.plugins {
		pluginCPU = append(pluginCPU, float64((procCPU(p.pid())-s.pluginCPU0[i]).Microseconds())/float64(max(pods, 1)))
	}
	res.Extra = map[string]float64{
		"pods_per_s":            float64(pods) / s.wall.Seconds(),
		"plugin_cpu_us_per_pod": median(pluginCPU),
	}
	want := s.next*stormEventsPerPod + 1
	for i, p := range s.plugins {
		n, err := p.finish(10 * time.Second)
		if err != nil {
			return err
		}
		if n < want || n > want+s.probes-1 {
			return fmt.Errorf("plugin %d handled %d events, want %d", i, n, want)
		}
	}
	s.plugins = nil
	s.close()
	return nil
}

func (s *stormRun) close() {
	for _, p := range s.plugins {
		p.kill()
	}
	s.plugins = nil
	if !s.stopped {
		s.stopped = true
		s.in.rt.Stop()
	}
}

// runStorm runs the storm's configurations side by side, round by round:
// each round starts every configuration's adaptation and plugins, then
// lets them start their pods in bursts of stormBurst, taking turns (the
// order turning from burst to burst), so that whatever else the machine
// does for a while falls on all of them alike.
func (h *harness) runStorm(c *caseDef, rounds int) caseResult {
	loadStart := loadAverage()
	configs := c.emptyResults()
	for r := 0; r < rounds; r++ {
		t0 := time.Now()
		res, err := h.stormRound(c, r)
		if err != nil {
			msg := fmt.Sprintf("round %d: %v", r, err)
			for i := range configs {
				configs[i].Errors = append(configs[i].Errors, msg)
			}
			fmt.Fprintf(os.Stderr, "bench: %s: %s\n", c.Name, msg)
			continue
		}
		for i, rr := range res {
			h.logf("%-22s %-8s %-9s round %d: %7.1f pods/s  p50 %9.1f µs  p99 %9.1f µs  cpu %8.1f µs/pod  plugin cpu %8.1f µs/pod (%v)",
				c.Name, configs[i].Impl, configs[i].Stub, r, rr.Extra["pods_per_s"], rr.P50us, rr.P99us, rr.CPUusPerOp,
				rr.Extra["plugin_cpu_us_per_pod"], time.Since(t0).Round(time.Millisecond))
			configs[i].Rounds = append(configs[i].Rounds, rr)
		}
	}
	for i := range configs {
		summarize(&configs[i])
		var pps, pcpu []float64
		for _, rr := range configs[i].Rounds {
			pps = append(pps, rr.Extra["pods_per_s"])
			pcpu = append(pcpu, rr.Extra["plugin_cpu_us_per_pod"])
		}
		configs[i].PodsPerS, configs[i].PluginCPUusPerPod = median(pps), median(pcpu)
	}
	out := c.caseResult
	out.Paired = true
	out.Configs = configs
	out.LoadStart, out.LoadEnd = loadStart, loadAverage()
	return out
}

func (h *harness) stormRound(c *caseDef, round int) ([]roundResult, error) {
	runs := make([]*stormRun, 0, len(c.configs))
	defer func() {
		for _, s := range runs {
			s.close()
		}
	}()
	for _, cfg := range c.configs {
		s, err := startStorm(h, c, cfg[0], cfg[1])
		if err != nil {
			return nil, fmt.Errorf("%s/%s: %w", cfg[0], cfg[1], err)
		}
		runs = append(runs, s)
	}
	settle()
	for b := 0; b*stormBurst < c.ops; b++ {
		n := min(stormBurst, c.ops-b*stormBurst)
		for j := range runs {
			i := (j + b + round) % len(runs)
			if err := runs[i].burst(n, true); err != nil {
				return nil, fmt.Errorf("%s/%s: %w", c.configs[i][0], c.configs[i][1], err)
			}
		}
	}
	res := make([]roundResult, len(runs))
	for i, s := range runs {
		res[i].Round = round
		if err := s.finish(&res[i]); err != nil {
			return nil, fmt.Errorf("%s/%s: %w", c.configs[i][0], c.configs[i][1], err)
		}
	}
	return res, nil
}
