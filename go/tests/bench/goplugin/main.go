// Command goplugin is the benchmark plugin on upstream's Go stub
// (github.com/containerd/nri/pkg/stub, pinned in go.mod). Its twin on
// nri-rs's Rust stub is tests/tools/src/bin/nri-bench-plugin.rs: same
// flags, same subscriptions, same replies, so the stubs are compared on
// equal work. See that file for what the flags mean. Two flags are this
// plugin's alone: -create-wait and -create-burn, which only the pod-start
// storm (whose plugins are Go-stub ones, typical of nodes) uses.
package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/containerd/nri/pkg/api"
	"github.com/containerd/nri/pkg/stub"
	"github.com/sirupsen/logrus"
	"golang.org/x/sys/unix"
)

type plugin struct {
	typical bool
	large   bool
	slot    int
	events  atomic.Uint64
	// Every unsolicited-th CreateContainer is followed by an unsolicited
	// update of that container (0: never); updates counts those the
	// runtime took.
	unsolicited int
	updates     atomic.Uint64
	stub        atomic.Pointer[stub.Stub]
	// What each CreateContainer costs the plugin before it answers: a
	// wait (sleeping, as for a cgroup write or a call to the kubelet's
	// API) and CPU burnt on the handling thread; 0 for neither.
	createWait time.Duration
	createBurn time.Duration
}

// The large mode's extra adjustment, a reply of about 3.3 MB (ttrpc's limit
// is 4 MiB); must match the Rust plugin's.
const (
	largeAnnotations = 6000
	largeEnv         = 2000
)

var (
	largeAnnotationValue = strings.Repeat("a", 480)
	largeEnvValue        = strings.Repeat("e", 100)
)

// resourceSetter is what ContainerAdjustment and ContainerUpdate share.
type resourceSetter interface {
	SetLinuxCPUShares(uint64)
	SetLinuxCPUQuota(int64)
	SetLinuxCPUPeriod(int64)
	SetLinuxCPURealtimeRuntime(int64)
	SetLinuxCPURealtimePeriod(uint64)
	SetLinuxCPUSetCPUs(string)
	SetLinuxCPUSetMems(string)
	SetLinuxMemoryLimit(int64)
	SetLinuxMemoryReservation(int64)
	SetLinuxMemorySwap(int64)
	SetLinuxMemorySwappiness(uint64)
	SetLinuxMemoryDisableOomKiller()
	SetLinuxMemoryUseHierarchy()
	AddLinuxHugepageLimit(string, uint64)
	AddLinuxUnified(string, string)
}

// setSlotResources sets one CPU-ish and one memory-ish field per slot,
// distinct across slots; must match the Rust plugin's set_slot_resources.
func setSlotResources(x resourceSetter, slot int) {
	switch slot % 8 {
	case 0:
		x.SetLinuxCPUShares(1024)
		x.SetLinuxMemoryLimit(1 << 30)
	case 1:
		x.SetLinuxCPUQuota(50000)
		x.SetLinuxMemoryReservation(512 << 20)
	case 2:
		x.SetLinuxCPUPeriod(100000)
		x.SetLinuxMemorySwap(2 << 30)
	case 3:
		x.SetLinuxCPURealtimeRuntime(1000)
		x.SetLinuxMemorySwappiness(10)
	case 4:
		x.SetLinuxCPURealtimePeriod(10000)
		x.SetLinuxMemoryDisableOomKiller()
	case 5:
		x.SetLinuxCPUSetCPUs("0-1")
		x.SetLinuxMemoryUseHierarchy()
	case 6:
		x.SetLinuxCPUSetMems("0")
		x.AddLinuxHugepageLimit("2MB", 64<<20)
	default:
		x.AddLinuxUnified("cpu.weight", "100")
		x.AddLinuxUnified("memory.high", "max")
	}
}

func (p *plugin) count() { p.events.Add(1) }

func (p *plugin) Synchronize(context.Context, []*api.PodSandbox, []*api.Container) ([]*api.ContainerUpdate, error) {
	return nil, nil
}

func (p *plugin) RunPodSandbox(context.Context, *api.PodSandbox) error { p.count(); return nil }
func (p *plugin) UpdatePodSandbox(context.Context, *api.PodSandbox, *api.LinuxResources, *api.LinuxResources) error {
	p.count()
	return nil
}
func (p *plugin) PostUpdatePodSandbox(context.Context, *api.PodSandbox) error { p.count(); return nil }
func (p *plugin) StopPodSandbox(context.Context, *api.PodSandbox) error       { p.count(); return nil }
func (p *plugin) RemovePodSandbox(context.Context, *api.PodSandbox) error     { p.count(); return nil }

// updateLater sends an unsolicited update of ctr, after the reply.
func (p *plugin) updateLater(ctr *api.Container) {
	s := p.stub.Load()
	if s == nil {
		return
	}
	u := &api.ContainerUpdate{}
	u.SetContainerId(ctr.Id)
	setSlotResources(u, p.slot)
	go func() {
		if _, err := (*s).UpdateContainers([]*api.ContainerUpdate{u}); err == nil {
			p.updates.Add(1)
		}
	}()
}

func (p *plugin) CreateContainer(_ context.Context, _ *api.PodSandbox, ctr *api.Container) (*api.ContainerAdjustment, []*api.ContainerUpdate, error) {
	if p.createWait > 0 {
		time.Sleep(p.createWait)
	}
	if p.createBurn > 0 {
		burnCPU(p.createBurn)
	}
	n := p.events.Add(1)
	if p.unsolicited > 0 && n%uint64(p.unsolicited) == 0 {
		p.updateLater(ctr)
	}
	adjust := &api.ContainerAdjustment{}
	if p.typical {
		k := p.slot
		adjust.AddEnv(fmt.Sprintf("BENCH_PLUGIN_%d", k), fmt.Sprintf("plugin-%d", k))
		adjust.AddAnnotation(fmt.Sprintf("bench.nri.io/plugin-%d", k), "adjusted")
		adjust.AddMount(&api.Mount{
			Destination: fmt.Sprintf("/bench/%d", k),
			Type:        "bind",
			Source:      fmt.Sprintf("/var/lib/bench/%d", k),
			Options:     []string{"rbind", "ro"},
		})
		setSlotResources(adjust, k)
	}
	if p.large {
		for i := 0; i < largeAnnotations; i++ {
			adjust.AddAnnotation(fmt.Sprintf("bench.nri.io/large-%d-%d", p.slot, i), largeAnnotationValue)
		}
		for i := 0; i < largeEnv; i++ {
			adjust.AddEnv(fmt.Sprintf("BENCH_LARGE_%d_%d", p.slot, i), largeEnvValue)
		}
	}
	return adjust, nil, nil
}

func (p *plugin) PostCreateContainer(context.Context, *api.PodSandbox, *api.Container) error {
	p.count()
	return nil
}
func (p *plugin) StartContainer(context.Context, *api.PodSandbox, *api.Container) error {
	p.count()
	return nil
}
func (p *plugin) PostStartContainer(context.Context, *api.PodSandbox, *api.Container) error {
	p.count()
	return nil
}

func (p *plugin) UpdateContainer(_ context.Context, _ *api.PodSandbox, ctr *api.Container, _ *api.LinuxResources) ([]*api.ContainerUpdate, error) {
	p.count()
	if !p.typical {
		return nil, nil
	}
	u := &api.ContainerUpdate{}
	u.SetContainerId(ctr.Id)
	setSlotResources(u, p.slot)
	return []*api.ContainerUpdate{u}, nil
}

func (p *plugin) PostUpdateContainer(context.Context, *api.PodSandbox, *api.Container) error {
	p.count()
	return nil
}
func (p *plugin) StopContainer(context.Context, *api.PodSandbox, *api.Container) ([]*api.ContainerUpdate, error) {
	p.count()
	return nil, nil
}
func (p *plugin) RemoveContainer(context.Context, *api.PodSandbox, *api.Container) error {
	p.count()
	return nil
}

// burnCPU computes until the calling thread has used d of CPU time:
// thread time, not wall time, so that a plugin kept off the CPU by others
// still does all of its work.
func burnCPU(d time.Duration) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	start := threadCPU()
	x := uint64(1)
	for threadCPU()-start < d {
		for i := 0; i < 1000; i++ {
			x = x*6364136223846793005 + 1442695040888963407
		}
	}
	burnSink.Add(x)
}

// burnSink keeps the burning loop's result alive.
var burnSink atomic.Uint64

func threadCPU() time.Duration {
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts)
	return time.Duration(ts.Nano())
}

func main() {
	socket := flag.String("socket", api.DefaultSocketPath, "NRI socket")
	name := flag.String("name", "bench", "plugin name")
	idx := flag.String("idx", "10", "plugin index")
	mode := flag.String("mode", "typical", "typical, noop or large")
	slot := flag.Int("slot", 0, "which fields and keys to adjust (0-7)")
	waitStdin := flag.Bool("wait-stdin", false, "read a line from stdin before connecting")
	reconnect := flag.Bool("reconnect", false, "connect again when the runtime goes away (exit only when stdin closes)")
	unsolicited := flag.Int("unsolicited", 0, "after every N-th CreateContainer, an unsolicited update of it")
	createWait := flag.Duration("create-wait", 0, "sleep this long in every CreateContainer before answering")
	createBurn := flag.Duration("create-burn", 0, "use this much CPU in every CreateContainer before answering")
	flag.Parse()
	logrus.SetLevel(logrus.WarnLevel)

	if *mode != "typical" && *mode != "noop" && *mode != "large" {
		fmt.Fprintf(os.Stderr, "goplugin: unknown mode %q\n", *mode)
		os.Exit(2)
	}
	stdin := bufio.NewReader(os.Stdin)
	if *waitStdin {
		fmt.Println("waiting")
		_, _ = stdin.ReadString('\n')
	}
	p := &plugin{typical: *mode != "noop", large: *mode == "large", slot: *slot, unsolicited: *unsolicited,
		createWait: *createWait, createBurn: *createBurn}
	// Report once and exit: on stdin EOF (upstream's runtime leaves
	// external plugins connected when it stops) or when the connection closes.
	var report sync.Once
	exit := func(code int, why string) {
		report.Do(func() {
			fmt.Fprintf(os.Stderr, "goplugin %s-bench%d: exiting: %s\n", *idx, *slot, why)
			fmt.Printf("updates=%d\n", p.updates.Load())
			fmt.Printf("events=%d\n", p.events.Load())
		})
		os.Exit(code)
	}
	done := func() { exit(0, "connection closed") }
	// Launched by the runtime, the plugin has its name, index and socket
	// from the environment, no stdin to watch, and ends with its connection.
	launched := os.Getenv(api.PluginNameEnvVar) != ""
	if !launched {
		go func() {
			_, err := io.Copy(io.Discard, stdin)
			exit(0, fmt.Sprintf("stdin closed (%v)", err))
		}()
	}
	opts := []stub.Option{stub.WithSocketPath(*socket)}
	if !launched {
		opts = append(opts, stub.WithPluginName(*name), stub.WithPluginIdx(*idx))
	}
	if *reconnect {
		// Upstream's stub does not reconnect: a new stub for every
		// connection, as a plugin that wants to must do.
		for {
			closed, once := make(chan struct{}), &sync.Once{}
			s, err := stub.New(p, append(opts, stub.WithOnClose(func() { once.Do(func() { close(closed) }) }))...)
			if err != nil {
				exit(1, err.Error())
			}
			p.stub.Store(&s)
			if err := s.Start(context.Background()); err == nil {
				<-closed
			}
			p.stub.Store(nil)
			time.Sleep(10 * time.Millisecond) // as nri-bench-plugin's -reconnect
		}
	}
	s, err := stub.New(p, append(opts, stub.WithOnClose(done))...)
	if err != nil {
		fmt.Fprintf(os.Stderr, "goplugin: %v\n", err)
		os.Exit(1)
	}
	p.stub.Store(&s)
	if err := s.Run(context.Background()); err != nil {
		fmt.Fprintf(os.Stderr, "goplugin: %v\n", err)
		exit(1, err.Error())
	}
	done()
}
