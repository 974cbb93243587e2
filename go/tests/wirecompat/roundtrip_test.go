package wirecompat

import (
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/containerd/nri/pkg/api"
	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/testing/protocmp"
)

// vtMessage is implemented by upstream's vtprotobuf-generated fast codec
// (api_vtproto.pb.go), which upstream uses for WASM plugins; ttrpc uses
// proto.Marshal.
type vtMessage interface {
	MarshalVT() ([]byte, error)
	UnmarshalVT([]byte) error
}

// upstreamTopLevelTypes returns upstream's Go type for every top-level
// message of its descriptor, sorted by name.
func upstreamTopLevelTypes(t *testing.T) []protoreflect.MessageType {
	t.Helper()
	msgs := api.File_pkg_api_api_proto.Messages()
	var types []protoreflect.MessageType
	for i := 0; i < msgs.Len(); i++ {
		mt, err := protoregistry.GlobalTypes.FindMessageByName(msgs.Get(i).FullName())
		require.NoError(t, err, "upstream Go type of %s", msgs.Get(i).FullName())
		types = append(types, mt)
	}
	sort.Slice(types, func(i, j int) bool {
		return types[i].Descriptor().Name() < types[j].Descriptor().Name()
	})
	require.Greater(t, len(types), 80, "upstream descriptor looks incomplete")
	return types
}

// echoAndCompare sends msg through nri-wire-echo in strict mode, decodes
// the reply with msg's upstream type and requires it to equal both msg and
// what upstream itself decodes from its own encoding of msg. The same is
// done with upstream's vtprotobuf codec, and in non-strict mode.
func echoAndCompare(t *testing.T, echo *echoProcess, msg proto.Message) {
	t.Helper()
	name := string(msg.ProtoReflect().Descriptor().Name())

	encoded, err := proto.Marshal(msg)
	require.NoError(t, err, "upstream proto.Marshal")
	reference := msg.ProtoReflect().Type().New().Interface()
	require.NoError(t, proto.Unmarshal(encoded, reference), "upstream proto.Unmarshal of its own encoding")

	for _, mode := range []string{strictPrefix, ""} {
		reply, err := echo.roundTrip(mode+name, encoded)
		require.NoError(t, err)
		require.True(t, reply.OK, "nri-wire-echo refused %s%s (%d bytes): %s", mode, name, len(encoded), reply.Error())

		got := msg.ProtoReflect().Type().New().Interface()
		require.NoError(t, proto.Unmarshal(reply.Body, got), "upstream cannot decode what nri-rs encoded")
		requireEqual(t, reference, got, "reference (upstream's own round trip) vs nri-rs round trip, mode %q", mode)
		requireEqual(t, msg, got, "original vs nri-rs round trip, mode %q", mode)
		require.Equal(t, len(encoded), len(reply.Body), "re-encoded size differs from upstream's")

		if mode == "" {
			continue
		}
		if vt, ok := msg.(vtMessage); ok {
			vtEncoded, err := vt.MarshalVT()
			require.NoError(t, err, "upstream MarshalVT")
			vtReply, err := echo.roundTrip(mode+name, vtEncoded)
			require.NoError(t, err)
			require.True(t, vtReply.OK, "nri-wire-echo refused the vtproto encoding of %s: %s", name, vtReply.Error())
			vtGot := msg.ProtoReflect().Type().New().Interface()
			require.NoError(t, vtGot.(vtMessage).UnmarshalVT(vtReply.Body), "upstream UnmarshalVT of what nri-rs encoded")
			requireEqual(t, msg, vtGot, "original vs nri-rs round trip via vtproto codec")
		}
	}
}

func requireEqual(t *testing.T, want, got proto.Message, what string, args ...any) {
	t.Helper()
	if !proto.Equal(want, got) {
		t.Fatalf("%s: messages differ (-want +got):\n%s", fmt.Sprintf(what, args...),
			cmp.Diff(want, got, protocmp.Transform()))
	}
}

// TestRoundTripEveryMessageType fills every field of every top-level
// message type of upstream's descriptor (generically, via reflection), and
// round-trips it through nri-rs's types; likewise the empty message.
func TestRoundTripEveryMessageType(t *testing.T) {
	echo := startEcho(t)
	types := upstreamTopLevelTypes(t)
	totalValues, totalBytes := 0, 0
	for _, mt := range types {
		full := mt.New()
		pop := newPopulator()
		pop.fill(full)
		name := string(mt.Descriptor().Name())
		require.Empty(t, pop.truncated, "%s: depth limit reached, raise maxDepth", name)
		missing := unpopulated(full, pop.entries)
		require.Empty(t, missing, "%s: the populator left fields unset:\n%s", name, joinLimited(missing, 20))
		totalValues += countFields(full)
		totalBytes += proto.Size(full.Interface())

		t.Run(name+"/full", func(t *testing.T) {
			t.Parallel()
			echoAndCompare(t, echo, full.Interface())
		})
		t.Run(name+"/empty", func(t *testing.T) {
			t.Parallel()
			empty := mt.New().Interface()
			echoAndCompare(t, echo, empty)
		})
	}
	t.Logf("%d message types, %d populated leaf values, %d bytes encoded", len(types), totalValues, totalBytes)
}

// TestRoundTripRealistic round-trips hand-written messages built with
// upstream's helpers.
func TestRoundTripRealistic(t *testing.T) {
	echo := startEcho(t)
	msgs := realisticMessages()
	names := make([]string, 0, len(msgs))
	for name := range msgs {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		msg := msgs[name]
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			echoAndCompare(t, echo, msg)
		})
	}
}

// TestRoundTripLargeSynchronize sends a SynchronizeRequest of many fully
// populated pods and containers, as a runtime does on plugin start-up.
func TestRoundTripLargeSynchronize(t *testing.T) {
	echo := startEcho(t)
	req := &api.SynchronizeRequest{More: true}
	pop := newPopulator()
	for i := 0; i < 40; i++ {
		pod := &api.PodSandbox{}
		pop.fill(pod.ProtoReflect())
		req.Pods = append(req.Pods, pod)
	}
	for i := 0; i < 120; i++ {
		ctr := &api.Container{}
		pop.fill(ctr.ProtoReflect())
		req.Containers = append(req.Containers, ctr)
	}
	t.Logf("SynchronizeRequest of %d bytes", proto.Size(req))
	require.Greater(t, proto.Size(req), 1<<20)
	echoAndCompare(t, echo, req)
}

// TestRoundTripPresence checks that explicitly present but zero/empty values
// survive: optional wrappers holding zero ("set to zero" is not "leave
// alone" in NRI), empty sub-messages, empty strings in lists, empty map keys
// and values, zero enum values in repeated fields.
func TestRoundTripPresence(t *testing.T) {
	echo := startEcho(t)
	zero := 0
	adjust := &api.ContainerAdjustment{}
	adjust.SetLinuxMemoryLimit(0)
	adjust.SetLinuxMemorySwappiness(0)
	adjust.SetLinuxCPUShares(0)
	adjust.SetLinuxCPUQuota(0)
	adjust.SetLinuxBlockIOClass("")
	adjust.SetLinuxRDTClass("")
	adjust.SetLinuxRDTClosID("")
	adjust.SetLinuxRDTSchemata([]string{})
	adjust.SetLinuxRDTEnableMonitoring(false)
	adjust.SetLinuxOomScoreAdj(&zero)
	adjust.SetLinuxIOPriority(&api.LinuxIOPriority{})
	adjust.SetLinuxScheduler(&api.LinuxScheduler{Flags: []api.LinuxSchedulerFlag{0, 0, 3}})
	adjust.SetLinuxMemoryPolicy(api.MpolMode_MPOL_DEFAULT, "", api.MpolFlag_MPOL_F_STATIC_NODES)
	adjust.AddEnv("", "")
	adjust.AddAnnotation("", "")
	adjust.AddLinuxNetDevice("", &api.LinuxNetDevice{})
	adjust.SetArgs([]string{"", "", ""})
	adjust.AddDevice(&api.LinuxDevice{FileMode: api.FileMode(0), Uid: api.UInt32(0), Gid: api.UInt32(0)})

	owners := &api.FieldOwners{
		Simple:   map[int32]string{0: "", -1: "negative key"},
		Compound: map[int32]*api.CompoundFieldOwners{0: {}, 6: {Owners: map[string]string{"": ""}}},
	}
	cases := map[string]proto.Message{
		"ContainerAdjustment/zeroes": adjust,
		"FieldOwners/zero keys":      owners,
		"Container/empty subs": &api.Container{
			Hooks: &api.Hooks{}, Linux: &api.LinuxContainer{Resources: &api.LinuxResources{Memory: &api.LinuxMemory{}, Cpu: &api.LinuxCPU{}}},
			User: &api.User{AdditionalGids: []uint32{0, 0}}, Image: &api.Image{},
			Mounts: []*api.Mount{{}, {}}, CDIDevices: []*api.CDIDevice{{}},
		},
		"LinuxRdt/zeroes":               &api.LinuxRdt{ClosId: api.String(""), Schemata: api.RepeatedString([]string{""}), EnableMonitoring: api.Bool(false)},
		"OptionalInt/zero":              &api.OptionalInt{},
		"UpdatePodSandboxRequest/empty": &api.UpdatePodSandboxRequest{Pod: &api.PodSandbox{}, OverheadLinuxResources: &api.LinuxResources{}, LinuxResources: &api.LinuxResources{}},
		"OwningPlugins/empty values":    &api.OwningPlugins{Owners: map[string]*api.FieldOwners{"": {}, "c1": {}}},
		"Hook/zero timeout":             &api.Hook{Timeout: api.Int(0)},
	}
	for name, msg := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			echoAndCompare(t, echo, msg)
		})
	}
}

// TestRoundTripExtremeValues checks the limits of every scalar encoding.
func TestRoundTripExtremeValues(t *testing.T) {
	echo := startEcho(t)
	cases := map[string]proto.Message{
		"int64 min":   &api.OptionalInt64{Value: -1 << 63},
		"int64 max":   &api.OptionalInt64{Value: 1<<63 - 1},
		"int32 min":   &api.OptionalInt32{Value: -1 << 31},
		"int32 -1":    &api.LinuxScheduler{Nice: -1, Priority: -1 << 31},
		"uint32 max":  &api.User{Uid: ^uint32(0), Gid: ^uint32(0), AdditionalGids: []uint32{^uint32(0), 0, 1}},
		"uint64 max":  &api.LinuxSeccompArg{Index: ^uint32(0), Value: ^uint64(0), ValueTwo: 1 << 63},
		"enum max":    &api.StateChangeEvent{Event: api.Event_LAST},
		"long string": &api.LogRequest{Msg: strings.Repeat("ünïcødé ", 1<<16), Level: api.LogRequest_LEVEL_DEBUG},
		"many entries": func() proto.Message {
			m := &api.CompoundFieldOwners{Owners: map[string]string{}}
			for i := 0; i < 5000; i++ {
				m.Owners[fmt.Sprintf("ENV_%d", i)] = fmt.Sprintf("plugin-%d", i%7)
			}
			return m
		}(),
	}
	for name, msg := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			echoAndCompare(t, echo, msg)
		})
	}
}

// TestRoundTripUnpackedRepeated feeds repeated scalars in the unpacked
// encoding, which proto3 decoders must accept too, and checks nri-rs
// re-encodes them into something upstream decodes to the same values.
func TestRoundTripUnpackedRepeated(t *testing.T) {
	echo := startEcho(t)
	check := func(t *testing.T, name string, encoded []byte, want proto.Message) {
		t.Helper()
		decoded := want.ProtoReflect().Type().New().Interface()
		require.NoError(t, proto.Unmarshal(encoded, decoded))
		requireEqual(t, want, decoded, "upstream decoding of the hand-made encoding")
		reply, err := echo.roundTrip(strictPrefix+name, encoded)
		require.NoError(t, err)
		require.True(t, reply.OK, reply.Error())
		got := want.ProtoReflect().Type().New().Interface()
		require.NoError(t, proto.Unmarshal(reply.Body, got))
		requireEqual(t, want, got, "nri-rs round trip of the unpacked encoding")
	}

	t.Run("User.additional_gids", func(t *testing.T) {
		var b []byte
		b = protowire.AppendTag(b, 1, protowire.VarintType)
		b = protowire.AppendVarint(b, 1000)
		for _, gid := range []uint64{4, 1 << 31, 27} {
			b = protowire.AppendTag(b, 3, protowire.VarintType)
			b = protowire.AppendVarint(b, gid)
		}
		check(t, "User", b, &api.User{Uid: 1000, AdditionalGids: []uint32{4, 1 << 31, 27}})
	})
	t.Run("LinuxScheduler.flags mixed packed and unpacked", func(t *testing.T) {
		var b []byte
		b = protowire.AppendTag(b, 4, protowire.VarintType)
		b = protowire.AppendVarint(b, 6)
		b = protowire.AppendTag(b, 4, protowire.BytesType)
		b = protowire.AppendBytes(b, []byte{1, 2})
		b = protowire.AppendTag(b, 4, protowire.VarintType)
		b = protowire.AppendVarint(b, 0)
		check(t, "LinuxScheduler", b, &api.LinuxScheduler{Flags: []api.LinuxSchedulerFlag{6, 1, 2, 0}})
	})
	t.Run("fields out of order and repeated singular scalar", func(t *testing.T) {
		// The last occurrence of a singular scalar wins.
		var b []byte
		b = protowire.AppendTag(b, 2, protowire.BytesType)
		b = protowire.AppendString(b, "first")
		b = protowire.AppendTag(b, 1, protowire.BytesType)
		b = protowire.AppendString(b, "name")
		b = protowire.AppendTag(b, 2, protowire.BytesType)
		b = protowire.AppendString(b, "second")
		check(t, "PluginInstance", b, &api.PluginInstance{Name: "name", Index: "second"})
	})
}

// TestRoundTripSplitEmbeddedMessage feeds a singular embedded message that
// occurs twice; the protobuf spec says the occurrences are merged. Go's
// encoders never emit this, so NRI traffic from upstream is unaffected, but
// rust-protobuf 3.7.2 keeps only the last occurrence
// (stepancheg/rust-protobuf#674). The test skips, saying so, while that is
// the case, fails on any other outcome, and passes once rust-protobuf
// merges.
func TestRoundTripSplitEmbeddedMessage(t *testing.T) {
	echo := startEcho(t)
	inner1, err := proto.Marshal(&api.LinuxMemory{Limit: api.Int64(1), Swap: api.Int64(1)})
	require.NoError(t, err)
	inner2, err := proto.Marshal(&api.LinuxMemory{Swap: api.Int64(2), UseHierarchy: api.Bool(true)})
	require.NoError(t, err)
	var b []byte
	b = protowire.AppendTag(b, 1, protowire.BytesType)
	b = protowire.AppendBytes(b, inner1)
	b = protowire.AppendTag(b, 8, protowire.BytesType)
	b = protowire.AppendBytes(b, []byte{0x08, 0x07}) // pids.limit = 7
	b = protowire.AppendTag(b, 1, protowire.BytesType)
	b = protowire.AppendBytes(b, inner2)

	merged := &api.LinuxResources{
		Memory: &api.LinuxMemory{Limit: api.Int64(1), Swap: api.Int64(2), UseHierarchy: api.Bool(true)},
		Pids:   &api.LinuxPids{Limit: 7},
	}
	upstream := &api.LinuxResources{}
	require.NoError(t, proto.Unmarshal(b, upstream))
	requireEqual(t, merged, upstream, "upstream decoding of a split embedded message")

	reply, err := echo.roundTrip(strictPrefix+"LinuxResources", b)
	require.NoError(t, err)
	require.True(t, reply.OK, reply.Error())
	got := &api.LinuxResources{}
	require.NoError(t, proto.Unmarshal(reply.Body, got))
	if proto.Equal(merged, got) {
		return
	}
	lastWins := &api.LinuxResources{
		Memory: &api.LinuxMemory{Swap: api.Int64(2), UseHierarchy: api.Bool(true)},
		Pids:   &api.LinuxPids{Limit: 7},
	}
	requireEqual(t, lastWins, got, "nri-rs decoding of a split embedded message is neither merged nor last-wins")
	t.Skip("known deviation: rust-protobuf 3.7.2 replaces, instead of merging, a repeated occurrence " +
		"of a singular embedded message (stepancheg/rust-protobuf#674); upstream's Go encoders never produce one")
}

// TestEchoUnknownDataDetection checks that the strict mode really catches
// data our schema would not know, at any depth, so that the round-trip
// tests cannot pass by rust-protobuf carrying unknown fields through.
func TestEchoUnknownDataDetection(t *testing.T) {
	echo := startEcho(t)

	withUnknown := func(m proto.Message, number protowire.Number) {
		var raw []byte
		raw = protowire.AppendTag(raw, number, protowire.VarintType)
		raw = protowire.AppendVarint(raw, 42)
		m.ProtoReflect().SetUnknown(raw)
	}
	top := &api.ContainerUpdate{ContainerId: "c"}
	withUnknown(top, 99)
	deep := &api.LinuxSeccompArg{Op: "SCMP_CMP_EQ"}
	withUnknown(deep, 1000)
	nested := &api.ValidateContainerAdjustmentRequest{
		Adjust: &api.ContainerAdjustment{Linux: &api.LinuxContainerAdjustment{
			SeccompPolicy: &api.LinuxSeccomp{Syscalls: []*api.LinuxSyscall{{}, {Args: []*api.LinuxSeccompArg{{}, deep}}}},
		}},
	}
	inMap := &api.CompoundFieldOwners{}
	withUnknown(inMap, 17)
	mapped := &api.OwningPlugins{Owners: map[string]*api.FieldOwners{
		"ctr": {Compound: map[int32]*api.CompoundFieldOwners{6: inMap}},
	}}

	cases := []struct {
		name string
		msg  proto.Message
		want string
	}{
		{"top-level", top, "ContainerUpdate: unknown field number 99"},
		{"deeply nested", nested, "ValidateContainerAdjustmentRequest.adjust.linux.seccomp_policy.syscalls[1].args[1]: unknown field number 1000"},
		{"inside map values", mapped, "unknown field number 17"},
		{"undefined enum number", &api.LinuxIOPriority{Class: api.IOPrioClass(77)}, "enum number 77 is not defined"},
		{"undefined enum in repeated", &api.LinuxMemoryPolicy{Flags: []api.MpolFlag{1, 9}}, "LinuxMemoryPolicy.flags[1]: enum number 9"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			encoded, err := proto.Marshal(tc.msg)
			require.NoError(t, err)
			name := string(tc.msg.ProtoReflect().Descriptor().Name())

			strict, err := echo.roundTrip(strictPrefix+name, encoded)
			require.NoError(t, err)
			require.False(t, strict.OK, "strict mode accepted %s carrying unknown data", name)
			require.Contains(t, strict.Error(), tc.want)

			// Without the check, rust-protobuf carries the data through.
			plain, err := echo.roundTrip(name, encoded)
			require.NoError(t, err)
			require.True(t, plain.OK, plain.Error())
			got := tc.msg.ProtoReflect().Type().New().Interface()
			require.NoError(t, proto.Unmarshal(plain.Body, got))
			requireEqual(t, tc.msg, got, "non-strict round trip")
		})
	}
}

// TestEchoRejectsBadInput checks that undecodable payloads and unknown type
// names give an error reply, not a crash, and that the process then keeps
// serving.
func TestEchoRejectsBadInput(t *testing.T) {
	echo := startEcho(t)
	good, err := proto.Marshal(&api.RegisterPluginRequest{PluginName: "p", PluginIdx: "10"})
	require.NoError(t, err)
	requireAlive := func(t *testing.T) {
		t.Helper()
		reply, err := echo.roundTrip(strictPrefix+"RegisterPluginRequest", good)
		require.NoError(t, err, "nri-wire-echo died after bad input")
		require.True(t, reply.OK, reply.Error())
		require.Equal(t, good, reply.Body)
	}

	cases := []struct {
		name    string
		typ     string
		payload []byte
		want    string // substring of the error text
	}{
		{"garbage", "ContainerAdjustment", []byte("\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff"), "decoding ContainerAdjustment"},
		{"truncated length-delimited", "PodSandbox", []byte{0x0a, 0x10, 'a', 'b'}, "decoding PodSandbox"},
		{"truncated varint", "Container", []byte{0x60, 0x80}, "decoding Container"},
		{"field number zero", "Empty", []byte{0x00, 0x01}, "decoding Empty"},
		{"wire type 7", "LinuxResources", []byte{0x0f, 0x00}, "decoding LinuxResources"},
		{"end group without start", "Mount", []byte{0x0c}, "decoding Mount"},
		{"bad nested message", "CreateContainerRequest", []byte{0x0a, 0x02, 0xff, 0xff}, "decoding CreateContainerRequest"},
		{"invalid UTF-8 string", "RegisterPluginRequest", []byte{0x0a, 0x02, 0xc3, 0x28}, "decoding RegisterPluginRequest"},
		{"unknown type", "NoSuchMessage", good, "unknown message type"},
		{"unknown type, strict", strictPrefix + "NoSuchMessage", good, "unknown message type"},
		{"nested type name", "LogRequest.Level", good, "unknown message type"},
		{"empty type name", "", good, "unknown message type"},
		{"upstream full name", "nri.pkg.api.v1alpha1.Empty", nil, "unknown message type"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			// Upstream must reject the payloads too, or the case is moot.
			if strings.HasPrefix(tc.want, "decoding ") {
				mt, err := protoregistry.GlobalTypes.FindMessageByName(protoreflect.FullName("nri.pkg.api.v1alpha1." + tc.typ))
				require.NoError(t, err)
				require.Error(t, proto.Unmarshal(tc.payload, mt.New().Interface()), "upstream accepts the payload")
			}
			reply, err := echo.roundTrip(tc.typ, tc.payload)
			require.NoError(t, err)
			require.False(t, reply.OK, "nri-wire-echo accepted bad input")
			require.NotEmpty(t, reply.Body, "error reply without text")
			require.Contains(t, reply.Error(), tc.want)
			require.NotContains(t, reply.Error(), "PANIC")
			requireAlive(t)
		})
	}
}
