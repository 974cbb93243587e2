// Package security runs upstream Go-stub plugins against go/adaptation's
// own security options: an identity policy (WithPluginIdentities) and
// the default validator's per-plugin permissions
// (WithDefaultValidatorPluginPermissions), and the audit log
// (WithAuditLog, WithAuditLogFile), end to end through the C ABI.
// Plugins of other users are the Rust tests' (they need root); here every
// plugin is this process, told apart by the names the policy grants.
package security

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/containerd/nri/pkg/api"
	"github.com/containerd/nri/pkg/stub"
	validator "github.com/containerd/nri/plugins/default-validator/builtin"
	nrirs "github.com/nri-rs/nri-rs/go/adaptation"
)

// start runs an adaptation with opts on a socket of its own.
func start(t *testing.T, opts ...nrirs.Option) (*nrirs.Adaptation, string) {
	t.Helper()
	dir := t.TempDir()
	socket := filepath.Join(dir, "nri.sock")
	sync := func(ctx context.Context, cb nrirs.SyncCB) error {
		_, err := cb(ctx, nil, nil)
		return err
	}
	update := func(context.Context, []*api.ContainerUpdate) ([]*api.ContainerUpdate, error) { return nil, nil }
	opts = append(opts, nrirs.WithSocketPath(socket), nrirs.WithPluginPath(filepath.Join(dir, "plugins")),
		nrirs.WithPluginConfigPath(filepath.Join(dir, "conf.d")))
	r, err := nrirs.New("security-test", "v1", sync, update, opts...)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Stop)
	return r, socket
}

// adjuster sets an annotation on every container, and an environment
// variable on those named "with-env".
type adjuster struct{}

func (adjuster) CreateContainer(_ context.Context, _ *api.PodSandbox, ctr *api.Container) (*api.ContainerAdjustment, []*api.ContainerUpdate, error) {
	adj := &api.ContainerAdjustment{}
	adj.AddAnnotation("adjusted-by", "test")
	if ctr.Name == "with-env" {
		adj.AddEnv("FOO", "bar")
	}
	return adj, nil, nil
}

// connect starts an upstream stub plugin as idx-name; it returns the
// stub's registration error, if any.
func connect(t *testing.T, socket, idx, name string) error {
	t.Helper()
	s, err := stub.New(adjuster{}, stub.WithSocketPath(socket), stub.WithPluginName(name),
		stub.WithPluginIdx(idx), stub.WithOnClose(func() {}))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.Start(ctx); err != nil {
		return err
	}
	t.Cleanup(s.Stop)
	return nil
}

func create(r *nrirs.Adaptation, name string) (*api.CreateContainerResponse, error) {
	pod := &api.PodSandbox{Id: "pod", Name: "pod", Namespace: "default", Uid: "pod-uid"}
	ctr := &api.Container{Id: "ctr-" + name, PodSandboxId: "pod", Name: name}
	return r.CreateContainer(context.Background(), &api.CreateContainerRequest{Pod: pod, Container: ctr})
}

// active waits until a plugin connected last takes part in creations: the
// stub's Start returns before the runtime has made it active.
func active(t *testing.T, r *nrirs.Adaptation) *api.CreateContainerResponse {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		rsp, err := create(r, "plain")
		if err == nil && rsp.GetAdjust().GetAnnotations()["adjusted-by"] == "test" {
			return rsp
		}
		if time.Now().After(deadline) {
			t.Fatalf("the plugin never took part: %v, %v", rsp, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func wantError(t *testing.T, err error, needle string) {
	t.Helper()
	if err == nil || !strings.Contains(err.Error(), needle) {
		t.Fatalf("got error %v, want one containing %q", err, needle)
	}
}

func TestIdentityPolicyBindsNamesToUsers(t *testing.T) {
	me := uint32(os.Getuid())
	r, socket := start(t,
		nrirs.WithPluginIdentities(
			nrirs.PluginIdentityRule{Plugins: []string{"resource-policy"}, UIDs: []uint32{me}},
			nrirs.PluginIdentityRule{Plugins: []string{"someone-else"}, UIDs: []uint32{me + 1}},
		),
		nrirs.WithDefaultValidator(&validator.DefaultValidatorConfig{Enable: true, RequiredPlugins: []string{"resource-policy"}}),
	)

	// Granted to another user only.
	wantError(t, connect(t, socket, "10", "someone-else"), "no identity rule admits uid=")
	// Granted to nobody.
	wantError(t, connect(t, socket, "10", "unlisted"), "may not register")
	if _, err := create(r, "plain"); err == nil || !strings.Contains(err.Error(), `required plugin "resource-policy" not present`) {
		t.Fatalf("creation without the required plugin: %v", err)
	}

	if err := connect(t, socket, "10", "resource-policy"); err != nil {
		t.Fatalf("the granted plugin: %v", err)
	}
	// Its name is held, whatever the index.
	wantError(t, connect(t, socket, "99", "resource-policy"), `plugin name "resource-policy" is held by external:10-resource-policy[`)
	active(t, r)
	id, ok := r.PluginIdentity("10-resource-policy")
	if !ok || id.UID != me || id.PID != os.Getpid() || id.Executable == "" {
		t.Errorf("identity of the granted plugin: %+v, %v", id, ok)
	}
	if id, ok := r.PluginIdentity("00-default-validator"); ok {
		t.Errorf("a builtin plugin has an identity: %+v", id)
	}
}

func TestPluginPermissionsDenyOneKindAndAllowAnother(t *testing.T) {
	r, socket := start(t,
		nrirs.WithDefaultValidator(&validator.DefaultValidatorConfig{Enable: true}),
		nrirs.WithDefaultValidatorPluginPermissions(
			nrirs.PluginPermissions{Plugins: []string{"annotator"}, Allow: []string{"annotations"}},
			nrirs.PluginPermissions{Plugins: []string{"*"}, Allow: []string{"resources"}},
		),
	)
	if err := connect(t, socket, "10", "annotator"); err != nil {
		t.Fatal(err)
	}
	// The annotation is allowed...
	active(t, r)
	// ...the environment variable is not.
	_, err := create(r, "with-env")
	wantError(t, err, `plugin "10-annotator" not permitted to adjust env: Env "FOO"`)
}

func TestNoSecurityOptionsKeepUpstreamsBehaviour(t *testing.T) {
	// The control of the tests above: any name, as often as asked.
	_, socket := start(t)
	for _, idx := range []string{"10", "99"} {
		if err := connect(t, socket, idx, "resource-policy"); err != nil {
			t.Fatalf("%s-resource-policy: %v", idx, err)
		}
	}
}

func TestAuditLogRecordsWhoChangedWhat(t *testing.T) {
	records := make(chan []byte, 16)
	file := filepath.Join(t.TempDir(), "audit.jsonl")
	r, socket := start(t,
		nrirs.WithAuditLog(func(record []byte) { records <- record }),
		nrirs.WithAuditLogFile(file),
	)
	if err := connect(t, socket, "10", "annotator"); err != nil {
		t.Fatal(err)
	}
	// Creations before the plugin was active changed nothing and left no
	// record; the one it took part in did.
	active(t, r)
	<-records
	if _, err := create(r, "with-env"); err != nil {
		t.Fatal(err)
	}
	var line []byte
	select {
	case line = <-records:
	case <-time.After(10 * time.Second):
		t.Fatal("no audit record")
	}
	var rec struct {
		Event      string `json:"event"`
		Outcome    string `json:"outcome"`
		Container  struct{ ID, Name string }
		Changes    []struct{ Container, Field, Key, Plugin string }
		Adjustment struct {
			Env []struct{ Key, Value string }
		}
		Plugins []struct {
			Name, Origin string
			UID          *uint32 `json:"uid"`
			PID          int     `json:"pid"`
		}
	}
	if err := json.Unmarshal(line, &rec); err != nil {
		t.Fatalf("%v: %s", err, line)
	}
	if rec.Event != "CreateContainer" || rec.Outcome != "applied" || rec.Container.ID != "ctr-with-env" {
		t.Errorf("record of %s", line)
	}
	type change struct{ Container, Field, Key, Plugin string }
	want := []change{{"ctr-with-env", "Annotations", "adjusted-by", "10-annotator"}, {"ctr-with-env", "Env", "FOO", "10-annotator"}}
	if len(rec.Changes) != len(want) {
		t.Fatalf("changes %+v, want %+v", rec.Changes, want)
	}
	for i, c := range rec.Changes {
		if change(c) != want[i] {
			t.Errorf("change %d: %+v, want %+v", i, c, want[i])
		}
	}
	if len(rec.Adjustment.Env) != 1 || rec.Adjustment.Env[0].Value != "(redacted)" || strings.Contains(string(line), "bar") {
		t.Errorf("the environment's value is not redacted: %s", line)
	}
	if len(rec.Plugins) != 1 || rec.Plugins[0].PID != os.Getpid() || rec.Plugins[0].UID == nil || *rec.Plugins[0].UID != uint32(os.Getuid()) {
		t.Errorf("plugins %+v", rec.Plugins)
	}
	r.Stop()
	text, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(text), "\n"), "\n")
	if lines[len(lines)-1] != string(line) {
		t.Errorf("the file's last line %q, want the record %q", lines[len(lines)-1], line)
	}
}
