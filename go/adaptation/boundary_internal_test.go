package adaptation

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/containerd/nri/pkg/api"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

// startBoundary starts an adaptation without plugins, stopped when t ends.
func startBoundary(t *testing.T) *Adaptation {
	t.Helper()
	noSync := func(ctx context.Context, cb SyncCB) error { _, err := cb(ctx, nil, nil); return err }
	noUpdate := func(context.Context, []*ContainerUpdate) ([]*ContainerUpdate, error) { return nil, nil }
	r, err := New("boundary", "0", noSync, noUpdate, WithPluginPath(t.TempDir()), WithDisabledExternalConnections())
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Stop)
	return r
}

// Bytes that are not a protobuf message reach the core and are refused
// with a clear error; the adaptation keeps working.
func TestGarbageBytesAreRefused(t *testing.T) {
	r := startBoundary(t)

	err := r.relayBytes(context.Background(), api.Event_CREATE_CONTAINER, []byte{0xff, 0xff, 0xff, 0xff}, &CreateContainerResponse{})
	if err == nil || !strings.HasPrefix(err.Error(), "invalid CreateContainerRequest") {
		t.Fatalf("garbage request: got %v", err)
	}
	if e, ok := err.(*nriError); !ok || e.status != 2 {
		t.Fatalf("garbage request: want status 2 (invalid message), got %#v", err)
	}
	if err := r.relay(context.Background(), api.Event_START_CONTAINER, []byte{0x0a, 0x05, 0x01}, nil); err == nil {
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

// unmarshalC decodes messages straight from the core's memory, which is
// freed right after. That is only sound while protobuf copies everything
// it decodes: strings, maps, repeated fields and unknown fields.
func TestUnmarshalKeepsNoReferenceToInput(t *testing.T) {
	// Compared with values built apart from the input: a copy of the
	// decoded message would share any aliased string with it.
	want := &api.CreateContainerRequest{
		Pod: &api.PodSandbox{Id: "pod0", Labels: map[string]string{"app": "web"}},
		Container: &api.Container{
			Id:     "ctr0",
			Env:    []string{"A=1"},
			Mounts: []*api.Mount{{Destination: "/mnt", Options: []string{"ro"}}},
		},
	}
	in, err := proto.Marshal(want)
	if err != nil {
		t.Fatal(err)
	}
	unknown := protowire.AppendTag(nil, 99, protowire.BytesType)
	unknown = protowire.AppendBytes(unknown, []byte("a field this API does not know"))
	in = append(in, unknown...)

	got := &api.CreateContainerRequest{Container: &api.Container{Args: []string{"stale"}}}
	if err := unmarshal(in, got); err != nil {
		t.Fatal(err)
	}
	for i := range in {
		in[i] = 0xa5
	}
	if !bytes.Equal(got.ProtoReflect().GetUnknown(), unknown) {
		t.Fatalf("unknown fields changed with the input: %q", got.ProtoReflect().GetUnknown())
	}
	got.ProtoReflect().SetUnknown(nil)
	if !proto.Equal(got, want) {
		t.Fatalf("decoded message changed with its input: %v", got)
	}
}

// marshal encodes with vtprotobuf: what it writes decodes, with
// proto.Unmarshal, to the message it was given, unknown fields included,
// also into a pooled buffer that held a longer encoding before.
func TestMarshalEncodesWhatProtoDecodes(t *testing.T) {
	long := &api.CreateContainerRequest{Container: &api.Container{Id: strings.Repeat("x", 4096)}}
	bp, err := marshal(long)
	if err != nil {
		t.Fatal(err)
	}
	releaseBuffer(bp)

	want := &api.CreateContainerRequest{
		Pod: &api.PodSandbox{Id: "pod0", Labels: map[string]string{"app": "web", "tier": "db"},
			Linux: &api.LinuxPodSandbox{CgroupParent: "/kubepods"}},
		Container: &api.Container{
			Id:     "ctr0",
			Args:   []string{"sh", "-c", "grüß dich"},
			Env:    []string{"A=1"},
			Mounts: []*api.Mount{{Destination: "/mnt", Options: []string{"ro"}}},
			Linux: &api.LinuxContainer{Resources: &api.LinuxResources{
				Memory: &api.LinuxMemory{Limit: api.Int64(1 << 30)},
			}},
		},
	}
	unknown := protowire.AppendTag(nil, 99, protowire.BytesType)
	unknown = protowire.AppendBytes(unknown, []byte("a field this API does not know"))
	want.ProtoReflect().SetUnknown(unknown)

	bp, err = marshal(want)
	if err != nil {
		t.Fatal(err)
	}
	defer releaseBuffer(bp)
	if len(*bp) != proto.Size(want) {
		t.Fatalf("encoded %d bytes, proto.Size says %d", len(*bp), proto.Size(want))
	}
	got := &api.CreateContainerRequest{}
	if err := proto.Unmarshal(*bp, got); err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(got, want) {
		t.Fatalf("decoded %v, want %v", got, want)
	}
}

// A string that is not UTF-8 is not checked by vtprotobuf's encoding, but
// the core's decoding refuses the request with a clear error, and the
// adaptation keeps working.
func TestNonUTF8StringsAreRefusedByTheCore(t *testing.T) {
	r := startBoundary(t)

	req := &api.CreateContainerRequest{
		Pod:       &api.PodSandbox{Id: "pod0", Labels: map[string]string{"app": "\xc3\x28"}},
		Container: &api.Container{Id: "ctr0", PodSandboxId: "pod0"},
	}
	err := r.relayMessage(context.Background(), api.Event_CREATE_CONTAINER, req, &CreateContainerResponse{})
	if err == nil || !strings.HasPrefix(err.Error(), "invalid CreateContainerRequest") {
		t.Fatalf("request with a label that is not UTF-8: got %v", err)
	}
	if e, ok := err.(*nriError); !ok || e.status != 2 {
		t.Fatalf("want status 2 (invalid message), got %#v", err)
	}
	req.Pod.Labels["app"] = "web"
	if err := r.relayMessage(context.Background(), api.Event_CREATE_CONTAINER, req, &CreateContainerResponse{}); err != nil {
		t.Fatalf("adaptation unusable after a request that is not UTF-8: %v", err)
	}
}
