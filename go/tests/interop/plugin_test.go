package interop

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/containerd/nri/pkg/api"
	"google.golang.org/protobuf/proto"
)

// allEvents is the order in which lifecycle() raises the events, plus the
// validation request upstream sends to validating plugins during create.
var allEvents = []string{
	"RunPodSandbox", "UpdatePodSandbox", "PostUpdatePodSandbox",
	"CreateContainer", "ValidateContainerAdjustment", "PostCreateContainer",
	"StartContainer", "PostStartContainer",
	"UpdateContainer", "PostUpdateContainer",
	"StopContainer", "RemoveContainer",
	"StopPodSandbox", "RemovePodSandbox",
}

// waitSynced waits until the plugin handled Synchronize, then uses
// BlockPluginSync as a barrier so the runtime has finished registering it.
func (r *testRuntime) waitSynced(rc *recorder) record {
	r.t.Helper()
	rec := rc.waitEvent("Synchronize")
	r.adapt.BlockPluginSync().Unblock()
	return rec
}

func existingState(nPods, nCtrs, annotationBytes int) ([]*api.PodSandbox, []*api.Container) {
	var pods []*api.PodSandbox
	var ctrs []*api.Container
	for i := 0; i < nPods; i++ {
		pods = append(pods, makePod(i, annotationBytes))
	}
	for i := 0; i < nCtrs; i++ {
		ctrs = append(ctrs, makeContainer(pods[i%nPods], i, annotationBytes))
	}
	return pods, ctrs
}

func checkAdjusted(t *testing.T, rsp *api.CreateContainerResponse, plugin, ctrID string) {
	t.Helper()
	adj := rsp.GetAdjust()
	if adj == nil {
		t.Fatalf("CreateContainer response has no adjustment: %v", rsp)
	}
	if got := adj.GetAnnotations()["nri-rs.test/"+plugin]; got != ctrID {
		t.Errorf("annotation nri-rs.test/%s = %q, want %q (adjustment %v)", plugin, got, ctrID, adj)
	}
	found := false
	for _, kv := range adj.GetEnv() {
		if kv.Key == "NRI_RS_PLUGIN_"+plugin && kv.Value == plugin {
			found = true
		}
	}
	if !found {
		t.Errorf("env NRI_RS_PLUGIN_%s=%s missing from adjustment %v", plugin, plugin, adj.GetEnv())
	}
}

// An external Rust plugin registers on the socket, gets the runtime's
// identity and timeouts, is synchronized with existing pods and containers,
// sees every lifecycle event in order and adjusts the container.
func TestExternalPluginLifecycle(t *testing.T) {
	pods, ctrs := existingState(3, 5, 0)
	r := newTestRuntime(t, pods, ctrs)
	r.start()
	rc := newRecorder(t, r.dir, "ext")
	r.startExternal("rsplugin", "10", map[string]any{"record": rc.path, "adjust": true})

	cfg := rc.waitEvent("Configure")
	if cfg.str("runtime_name") != "interop-runtime" || cfg.str("runtime_version") != "v1.2.3" {
		t.Errorf("runtime identity not received: %v", cfg)
	}
	if cfg.str("nri_version") == "" {
		t.Errorf("runtime NRI version not received: %v", cfg)
	}
	sync := r.waitSynced(rc)
	if sync.num("pods") != 3 || sync.num("containers") != 5 {
		t.Errorf("synchronized %d pods and %d containers, want 3 and 5", sync.num("pods"), sync.num("containers"))
	}

	pod, ctr := makePod(100, 0), makeContainer(makePod(100, 0), 100, 0)
	rsp := r.lifecycle(pod, ctr)
	checkAdjusted(t, rsp, "rsplugin", ctr.Id)

	rc.waitEvent("RemovePodSandbox")
	if got := rc.eventsAfterSync(); !reflect.DeepEqual(got, allEvents) {
		t.Errorf("events after sync:\n got %v\nwant %v", got, allEvents)
	}
}

// The runtime launches a pre-installed Rust plugin from its plugin
// directory (socketpair on fd 3, NRI_PLUGIN_* in the environment) and
// passes it the drop-in configuration.
func TestPreinstalledPluginLifecycle(t *testing.T) {
	pods, ctrs := existingState(2, 4, 0)
	r := newTestRuntime(t, pods, ctrs)
	rc := newRecorder(t, r.dir, "pre")
	r.installPlugin("rspre", "20", map[string]any{"record": rc.path, "adjust": true})
	r.start()

	cfg := rc.waitEvent("Configure")
	if !strings.Contains(cfg.str("config"), rc.path) {
		t.Errorf("drop-in configuration not received: %v", cfg)
	}
	sync := r.waitSynced(rc)
	if sync.num("pods") != 2 || sync.num("containers") != 4 {
		t.Errorf("synchronized %d pods and %d containers, want 2 and 4", sync.num("pods"), sync.num("containers"))
	}

	pod := makePod(7, 0)
	ctr := makeContainer(pod, 7, 0)
	rsp := r.lifecycle(pod, ctr)
	checkAdjusted(t, rsp, "rspre", ctr.Id)
	rc.waitEvent("RemovePodSandbox")
	if got := rc.eventsAfterSync(); !reflect.DeepEqual(got, allEvents) {
		t.Errorf("events after sync:\n got %v\nwant %v", got, allEvents)
	}
}

// A plugin subscribed to a subset of events gets exactly those.
func TestSubscriptionMask(t *testing.T) {
	r := newTestRuntime(t, nil, nil)
	r.start()
	rc := newRecorder(t, r.dir, "mask")
	r.startExternal("masked", "30", map[string]any{
		"record": rc.path,
		"events": "CreateContainer,StopContainer,RemovePodSandbox",
	})
	r.waitSynced(rc)
	pod := makePod(1, 0)
	r.lifecycle(pod, makeContainer(pod, 1, 0))
	rc.waitEvent("RemovePodSandbox")
	want := []string{"CreateContainer", "StopContainer", "RemovePodSandbox"}
	if got := rc.eventsAfterSync(); !reflect.DeepEqual(got, want) {
		t.Errorf("events after sync: got %v, want %v", got, want)
	}
}

// Requests and replies far over the 4096-byte frame size of Go's reader
// cross the trunk intact in both directions.
func TestLargeMessages(t *testing.T) {
	r := newTestRuntime(t, nil, nil)
	r.start()
	rc := newRecorder(t, r.dir, "large")
	r.startExternal("large", "40", map[string]any{"record": rc.path, "adjust": true, "annotation_bytes": 1 << 20})
	r.waitSynced(rc)

	for _, size := range []int{4000, 4087, 64 << 10, 1 << 20} {
		pod := makePod(size, size)
		ctr := makeContainer(pod, size, size)
		rsp, err := r.adapt.CreateContainer(context.Background(), &api.CreateContainerRequest{Pod: pod, Container: ctr})
		if err != nil {
			t.Fatalf("CreateContainer with %d-byte annotations: %v", size, err)
		}
		checkAdjusted(t, rsp, "large", ctr.Id)
		if got := len(rsp.GetAdjust().GetAnnotations()["nri-rs.test/big"]); got != 1<<20 {
			t.Errorf("big annotation has %d bytes, want %d", got, 1<<20)
		}
	}
}

// Synchronizing 1,000 containers of ~8 KiB each (~8 MiB of state) exceeds
// the 4 MiB ttrpc limit, so upstream splits it into chunks; the Rust stub
// reassembles them and the plugin sees every container once.
func TestSyncThousandContainersInChunks(t *testing.T) {
	pods, ctrs := existingState(500, 1000, 8<<10)
	if size := proto.Size(&api.SynchronizeRequest{Pods: pods, Containers: ctrs}); size <= 4<<20 {
		t.Fatalf("state is only %d bytes; it must exceed the 4 MiB ttrpc limit to force chunking", size)
	}
	r := newTestRuntime(t, pods, ctrs)
	r.start()
	rc := newRecorder(t, r.dir, "sync")
	r.startExternal("syncer", "50", map[string]any{"record": rc.path})
	sync := r.waitSynced(rc)
	if sync.num("pods") != 500 || sync.num("containers") != 1000 {
		t.Fatalf("synchronized %d pods and %d containers, want 500 and 1000", sync.num("pods"), sync.num("containers"))
	}
	if sync.str("first_container") != ctrs[0].Id || sync.str("last_container") != ctrs[999].Id {
		t.Errorf("containers out of order: first %q last %q", sync.str("first_container"), sync.str("last_container"))
	}
	// Still serving after the big sync.
	pod := makePod(9999, 0)
	if _, err := r.adapt.CreateContainer(context.Background(), &api.CreateContainerRequest{Pod: pod, Container: makeContainer(pod, 9999, 0)}); err != nil {
		t.Fatal(err)
	}
	rc.waitEvent("CreateContainer")
}

// A Rust plugin's unsolicited UpdateContainers request reaches upstream's
// UpdateFn with the update it asked for.
func TestUnsolicitedUpdateReachesRuntime(t *testing.T) {
	r := newTestRuntime(t, nil, nil)
	r.start()
	rc := newRecorder(t, r.dir, "unsolicited")
	r.startExternal("updater", "60", map[string]any{"record": rc.path, "update_on_start": true})
	r.waitSynced(rc)

	pod := makePod(3, 0)
	ctr := makeContainer(pod, 3, 0)
	if err := r.adapt.StartContainer(context.Background(), &api.StartContainerRequest{Pod: pod, Container: ctr}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-r.updatedC:
	case <-time.After(waitTimeout):
		t.Fatal("UpdateFn was never called")
	}
	r.updatesMu.Lock()
	got := r.updates[0]
	r.updatesMu.Unlock()
	if len(got) != 1 || got[0].ContainerId != ctr.Id {
		t.Fatalf("unexpected updates %v", got)
	}
	if shares := got[0].GetLinux().GetResources().GetCpu().GetShares().GetValue(); shares != 123 {
		t.Errorf("cpu shares = %d, want 123", shares)
	}
	res := rc.waitEvent("UpdateContainersResult")
	if _, hasErr := res["error"]; hasErr || res.num("failed") != 0 {
		t.Errorf("plugin saw %v", res)
	}
}

// Several Rust plugins, external and pre-installed, are all called and
// their adjustments merged by upstream.
func TestSeveralPluginsMerged(t *testing.T) {
	r := newTestRuntime(t, nil, nil)
	var recs []*recorder
	for i := 0; i < 2; i++ {
		rc := newRecorder(t, r.dir, fmt.Sprintf("pre%d", i))
		r.installPlugin(fmt.Sprintf("pre%d", i), fmt.Sprintf("1%d", i), map[string]any{"record": rc.path, "adjust": true})
		recs = append(recs, rc)
	}
	r.start()
	for i := 0; i < 2; i++ {
		rc := newRecorder(t, r.dir, fmt.Sprintf("ext%d", i))
		r.startExternal(fmt.Sprintf("ext%d", i), fmt.Sprintf("3%d", i), map[string]any{"record": rc.path})
		recs = append(recs, rc)
	}
	for _, rc := range recs {
		r.waitSynced(rc)
	}
	pod := makePod(5, 0)
	ctr := makeContainer(pod, 5, 0)
	rsp, err := r.adapt.CreateContainer(context.Background(), &api.CreateContainerRequest{Pod: pod, Container: ctr})
	if err != nil {
		t.Fatal(err)
	}
	checkAdjusted(t, rsp, "pre0", ctr.Id)
	checkAdjusted(t, rsp, "pre1", ctr.Id)
	for _, rc := range recs {
		rc.waitFor("CreateContainer of "+ctr.Id, func(rec record) bool {
			return rec.str("event") == "CreateContainer" && rec.str("container") == ctr.Id
		})
	}
}
