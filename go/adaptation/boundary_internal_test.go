package adaptation

import (
	"context"
	"strings"
	"testing"

	"github.com/containerd/nri/pkg/api"
)

// Bytes that are not a protobuf message reach the core and are refused
// with a clear error; the adaptation keeps working.
func TestGarbageBytesAreRefused(t *testing.T) {
	noSync := func(ctx context.Context, cb SyncCB) error { _, err := cb(ctx, nil, nil); return err }
	noUpdate := func(context.Context, []*ContainerUpdate) ([]*ContainerUpdate, error) { return nil, nil }
	r, err := New("boundary", "0", noSync, noUpdate, WithPluginPath(t.TempDir()), WithDisabledExternalConnections())
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Start(); err != nil {
		t.Fatal(err)
	}
	defer r.Stop()

	_, err = r.relayWithResponse([]byte{0xff, 0xff, 0xff, 0xff}, cCreateContainer)
	if err == nil || !strings.HasPrefix(err.Error(), "invalid CreateContainerRequest") {
		t.Fatalf("garbage request: got %v", err)
	}
	if e, ok := err.(*nriError); !ok || e.status != 2 {
		t.Fatalf("garbage request: want status 2 (invalid message), got %#v", err)
	}
	if err := r.relay([]byte{0x0a, 0x05, 0x01}, cStartContainer); err == nil {
		t.Fatal("truncated request accepted")
	}

	rsp, err := r.CreateContainer(context.Background(), &api.CreateContainerRequest{
		Pod:       &api.PodSandbox{Id: "pod0"},
		Container: &api.Container{Id: "ctr0", PodSandboxId: "pod0"},
	})
	if err != nil || rsp == nil {
		t.Fatalf("adaptation unusable after bad input: %v", err)
	}
}
