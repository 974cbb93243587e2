package plugincompat

import (
	"bytes"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// deployDir holds the Dockerfile and the kustomize tree (base, components,
// plugins, overlays, examples; see plugins/deploy/README.md).
const deployDir = "../../../plugins/deploy"

// daemonSet is the part of a rendered DaemonSet the checks look at.
type daemonSet struct {
	Kind     string `yaml:"kind"`
	Metadata struct {
		Name      string            `yaml:"name"`
		Namespace string            `yaml:"namespace"`
		Labels    map[string]string `yaml:"labels"`
	} `yaml:"metadata"`
	Spec struct {
		Selector struct {
			MatchLabels map[string]string `yaml:"matchLabels"`
		} `yaml:"selector"`
		Template struct {
			Metadata struct {
				Labels map[string]string `yaml:"labels"`
			} `yaml:"metadata"`
			Spec struct {
				Containers []struct {
					Name            string   `yaml:"name"`
					Image           string   `yaml:"image"`
					ImagePullPolicy string   `yaml:"imagePullPolicy"`
					Args            []string `yaml:"args"`
					Env             []struct {
						Name  string `yaml:"name"`
						Value string `yaml:"value"`
					} `yaml:"env"`
					SecurityContext struct {
						AllowPrivilegeEscalation *bool `yaml:"allowPrivilegeEscalation"`
						ReadOnlyRootFilesystem   *bool `yaml:"readOnlyRootFilesystem"`
						Capabilities             struct {
							Add  []string `yaml:"add"`
							Drop []string `yaml:"drop"`
						} `yaml:"capabilities"`
					} `yaml:"securityContext"`
					VolumeMounts []struct {
						Name      string `yaml:"name"`
						MountPath string `yaml:"mountPath"`
					} `yaml:"volumeMounts"`
				} `yaml:"containers"`
				Volumes []struct {
					Name     string `yaml:"name"`
					HostPath struct {
						Path string `yaml:"path"`
						Type string `yaml:"type"`
					} `yaml:"hostPath"`
				} `yaml:"volumes"`
			} `yaml:"spec"`
		} `yaml:"template"`
	} `yaml:"spec"`
}

// deployedPlugins are the plugins with an overlay, one directory each
// under kustomize/overlays.
func deployedPlugins(t *testing.T) []string {
	t.Helper()
	entries, err := os.ReadDir(filepath.Join(deployDir, "kustomize", "overlays"))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		if e.IsDir() {
			out = append(out, e.Name())
		}
	}
	return out
}

// kustomizer renders a kustomization directory: `kubectl kustomize`, else
// `kustomize build`; nil when neither is installed.
func kustomizer(t *testing.T) func(dir string) []byte {
	t.Helper()
	var argv []string
	if kubectl, err := exec.LookPath("kubectl"); err == nil {
		argv = []string{kubectl, "kustomize"}
	} else if kustomize, err := exec.LookPath("kustomize"); err == nil {
		argv = []string{kustomize, "build"}
	} else {
		return nil
	}
	return func(dir string) []byte {
		t.Helper()
		out, err := exec.Command(argv[0], append(argv[1:], dir)...).Output()
		if err != nil {
			var exit *exec.ExitError
			if errors.As(err, &exit) {
				t.Fatalf("%s %s: %v\n%s", strings.Join(argv, " "), dir, err, exit.Stderr)
			}
			t.Fatal(err)
		}
		return out
	}
}

// TestDeployDockerfile checks that the image build is the static,
// offline-capable one the README describes.
func TestDeployDockerfile(t *testing.T) {
	dockerfile, err := os.ReadFile(filepath.Join(deployDir, "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"ARG PLUGIN", `-p "nri-${PLUGIN}"`, "--locked --offline", "+crt-static", "ARG LIBC=gnu", "unknown-linux-${LIBC}",
		"plugins/deploy/vendor", "FROM scratch", "ENV NRI_PLUGIN_NAME=${PLUGIN}", `ENTRYPOINT ["/bin/plugin"]`,
	} {
		if !bytes.Contains(dockerfile, []byte(want)) {
			t.Errorf("Dockerfile lacks %q", want)
		}
	}
	ignore, err := os.ReadFile("../../../.dockerignore")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"**/target", ".git", "!/plugins/deploy/vendor"} {
		if !bytes.Contains(ignore, []byte(want)) {
			t.Errorf(".dockerignore lacks %q", want)
		}
	}
}

// TestDeployManifests renders every plugin's overlay, as it is and with
// the local-images component added on top the way an operator would, and
// checks the DaemonSet: the runtime's socket, the privileges, the image
// named in components/images, and arguments the Rust plugin accepts.
func TestDeployManifests(t *testing.T) {
	render := kustomizer(t)
	if render == nil {
		t.Skip("neither kubectl nor kustomize found: cannot render the overlays")
	}
	kdir, err := filepath.Abs(filepath.Join(deployDir, "kustomize"))
	if err != nil {
		t.Fatal(err)
	}
	plugins := deployedPlugins(t)
	// Every overlay is a plugin crate, with a component of its own.
	for _, name := range plugins {
		if _, err := os.Stat(filepath.Join("../../../plugins", name, "Cargo.toml")); err != nil {
			t.Errorf("overlay for %s, but no plugin crate plugins/%s", name, name)
		}
		if _, err := os.Stat(filepath.Join(kdir, "plugins", name, "kustomization.yaml")); err != nil {
			t.Errorf("overlay for %s, but no component kustomize/plugins/%s", name, name)
		}
	}
	if len(plugins) < 12 {
		t.Errorf("overlays for %d plugins, want all 12: %v", len(plugins), plugins)
	}
	for _, name := range plugins {
		overlay := filepath.Join(kdir, "overlays", name)
		t.Run(name, func(t *testing.T) {
			checkDaemonSet(t, name, "", onlyDaemonSet(t, render(overlay)))
		})
		t.Run(name+"/local-images", func(t *testing.T) {
			// kustomize takes relative paths only.
			dir := t.TempDir()
			rel := func(p string) string {
				r, err := filepath.Rel(dir, p)
				if err != nil {
					t.Fatal(err)
				}
				return r
			}
			k := "resources:\n  - " + rel(overlay) + "\ncomponents:\n  - " + rel(filepath.Join(kdir, "components", "local-images")) + "\n"
			if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(k), 0o644); err != nil {
				t.Fatal(err)
			}
			checkDaemonSet(t, name, "Never", onlyDaemonSet(t, render(dir)))
		})
	}
	t.Run("examples/kind", func(t *testing.T) {
		out := render(filepath.Join(kdir, "examples", "kind"))
		if n := bytes.Count(out, []byte("imagePullPolicy: Never")); n != 2 {
			t.Errorf("examples/kind: %d containers with imagePullPolicy Never, want 2\n%s", n, out)
		}
	})
}

func onlyDaemonSet(t *testing.T, data []byte) daemonSet {
	t.Helper()
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var all []daemonSet
	for {
		var ds daemonSet
		if err := dec.Decode(&ds); err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			t.Fatalf("bad YAML: %v", err)
		}
		if ds.Kind == "DaemonSet" {
			all = append(all, ds)
		}
	}
	if len(all) != 1 {
		t.Fatalf("want exactly one DaemonSet, got %d", len(all))
	}
	return all[0]
}

// checkDaemonSet checks one rendered plugin DaemonSet; policy is the
// imagePullPolicy expected ("" for the kubelet's default).
func checkDaemonSet(t *testing.T, name, policy string, ds daemonSet) {
	t.Helper()
	label := "nri-" + name
	if ds.Metadata.Name != label || ds.Metadata.Namespace != "kube-system" {
		t.Errorf("name %s/%s, want kube-system/%s", ds.Metadata.Namespace, ds.Metadata.Name, label)
	}
	for what, labels := range map[string]map[string]string{
		"metadata": ds.Metadata.Labels, "selector": ds.Spec.Selector.MatchLabels, "pod template": ds.Spec.Template.Metadata.Labels,
	} {
		if labels["app.kubernetes.io/name"] != label {
			t.Errorf("%s labels %v lack app.kubernetes.io/name=%s", what, labels, label)
		}
	}
	if len(ds.Spec.Selector.MatchLabels) != 1 {
		t.Errorf("selector %v: want only app.kubernetes.io/name (selectors cannot change later)", ds.Spec.Selector.MatchLabels)
	}
	spec := ds.Spec.Template.Spec
	if len(spec.Containers) != 1 {
		t.Fatalf("%d containers, want 1", len(spec.Containers))
	}
	c := spec.Containers[0]
	// The placeholder of components/images.
	if want := "nri-rs/nri-" + name + ":v0.1.0"; c.Image != want || c.ImagePullPolicy != policy {
		t.Errorf("image %s (pull policy %q), want %s (%q)", c.Image, c.ImagePullPolicy, want, policy)
	}
	sc := c.SecurityContext
	if p := sc.AllowPrivilegeEscalation; p == nil || *p {
		t.Errorf("allowPrivilegeEscalation must be false")
	}
	if r := sc.ReadOnlyRootFilesystem; r == nil || !*r {
		t.Errorf("readOnlyRootFilesystem must be true")
	}
	if strings.Join(sc.Capabilities.Drop, ",") != "ALL" {
		t.Errorf("capabilities drop %v, want [ALL]", sc.Capabilities.Drop)
	}
	wantAdd := ""
	if name == "network-device-injector" {
		wantAdd = "NET_ADMIN,SYS_ADMIN"
	}
	if got := strings.Join(sc.Capabilities.Add, ","); got != wantAdd {
		t.Errorf("capabilities add %q, want %q", got, wantAdd)
	}
	// The stub takes its index from NRI_PLUGIN_IDX; differ picks its own.
	idx := ""
	for _, e := range c.Env {
		if e.Name == "NRI_PLUGIN_IDX" {
			idx = e.Value
		}
	}
	if name == "differ" {
		if idx != "" {
			t.Errorf("differ registers at its -indices, but NRI_PLUGIN_IDX=%q", idx)
		}
	} else if len(idx) != 2 || strings.Trim(idx, "0123456789") != "" {
		t.Errorf("NRI_PLUGIN_IDX=%q, want two digits", idx)
	}
	// Every mount has its volume; the NRI socket is the host's socket.
	volumes := map[string]string{}
	for _, v := range spec.Volumes {
		volumes[v.Name] = v.HostPath.Path + " " + v.HostPath.Type
	}
	socket := false
	for _, m := range c.VolumeMounts {
		v, ok := volumes[m.Name]
		if !ok {
			t.Errorf("mount %s has no volume", m.Name)
		}
		if m.MountPath == "/var/run/nri/nri.sock" {
			socket = v == "/var/run/nri/nri.sock Socket"
		}
	}
	if !socket {
		t.Errorf("no hostPath Socket /var/run/nri/nri.sock mounted at /var/run/nri/nri.sock")
	}
	// The Rust plugin accepts the arguments (-h after them: usage, exit 0).
	bin := filepath.Join(binDir(t), "nri-"+name)
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("plugin binary missing: %v", err)
	}
	cmd := exec.Command(bin, append(append([]string{}, c.Args...), "-h")...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("nri-%s rejects the manifest's arguments %q: %v\n%s", name, c.Args, err, out)
	}
}
