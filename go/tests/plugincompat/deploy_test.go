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

// deployDir holds the Dockerfile and the kustomize manifests.
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
					SecurityContext struct {
						AllowPrivilegeEscalation *bool `yaml:"allowPrivilegeEscalation"`
						Capabilities             struct {
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

// deployedPlugins are the plugin directories with manifests.
func deployedPlugins(t *testing.T) []string {
	t.Helper()
	entries, err := os.ReadDir(filepath.Join(deployDir, "kustomize"))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		if e.IsDir() && e.Name() != "components" {
			out = append(out, e.Name())
		}
	}
	return out
}

// TestDeployManifests renders every plugin's kustomization, stable and
// unstable, with `kubectl kustomize` and checks the DaemonSet: upstream's
// socket mount and privileges, the image, and arguments the Rust plugin
// accepts. Without kubectl it checks the base manifests as written.
func TestDeployManifests(t *testing.T) {
	kubectl, kubectlErr := exec.LookPath("kubectl")
	if kubectlErr != nil {
		t.Logf("kubectl not found (%v): checking the base manifests only", kubectlErr)
	}
	dockerfile, err := os.ReadFile(filepath.Join(deployDir, "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"ARG PLUGIN", `-p "nri-${PLUGIN}"`, "ENV NRI_PLUGIN_NAME=${PLUGIN}", `ENTRYPOINT ["/bin/plugin"]`} {
		if !bytes.Contains(dockerfile, []byte(want)) {
			t.Errorf("Dockerfile lacks %q", want)
		}
	}
	plugins := deployedPlugins(t)
	// Every plugin crate that is a sample plugin has manifests, and back.
	for _, name := range plugins {
		if _, err := os.Stat(filepath.Join("../../../plugins", name, "Cargo.toml")); err != nil {
			t.Errorf("manifests for %s, but no plugin crate plugins/%s", name, name)
		}
	}
	if len(plugins) < 12 {
		t.Errorf("manifests for %d plugins, want all 12: %v", len(plugins), plugins)
	}
	for _, name := range plugins {
		for _, variant := range []struct{ dir, tag, policy string }{{"", "v0.1.0", "IfNotPresent"}, {"unstable", "unstable", "Always"}} {
			t.Run(name+"/"+variant.tag, func(t *testing.T) {
				var ds daemonSet
				if kubectl != "" {
					out, err := exec.Command(kubectl, "kustomize", filepath.Join(deployDir, "kustomize", name, variant.dir)).Output()
					if err != nil {
						var exit *exec.ExitError
						if errors.As(err, &exit) {
							t.Fatalf("kubectl kustomize: %v\n%s", err, exit.Stderr)
						}
						t.Fatal(err)
					}
					ds = onlyDaemonSet(t, out)
				} else {
					data, err := os.ReadFile(filepath.Join(deployDir, "kustomize", name, "base", "daemonset.yaml"))
					if err != nil {
						t.Fatal(err)
					}
					ds = onlyDaemonSet(t, data)
					// What kustomize would set.
					ds.Metadata.Namespace = "kube-system"
					ds.Spec.Template.Spec.Containers[0].Image = "ghcr.io/nri-rs/nri-rs/plugins/" + name + ":" + variant.tag
					ds.Spec.Template.Spec.Containers[0].ImagePullPolicy = variant.policy
					ds.Metadata.Labels = map[string]string{"app.kubernetes.io/name": "nri-plugin-" + name}
					ds.Spec.Selector.MatchLabels = ds.Metadata.Labels
					ds.Spec.Template.Metadata.Labels = ds.Metadata.Labels
				}
				checkDaemonSet(t, name, variant.tag, variant.policy, ds)
			})
		}
	}
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
		all = append(all, ds)
	}
	if len(all) != 1 || all[0].Kind != "DaemonSet" {
		t.Fatalf("want exactly one DaemonSet, got %d objects", len(all))
	}
	return all[0]
}

func checkDaemonSet(t *testing.T, name, tag, policy string, ds daemonSet) {
	t.Helper()
	label := "nri-plugin-" + name
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
	spec := ds.Spec.Template.Spec
	if len(spec.Containers) != 1 {
		t.Fatalf("%d containers, want 1", len(spec.Containers))
	}
	c := spec.Containers[0]
	if want := "ghcr.io/nri-rs/nri-rs/plugins/" + name + ":" + tag; c.Image != want || c.ImagePullPolicy != policy {
		t.Errorf("image %s (%s), want %s (%s)", c.Image, c.ImagePullPolicy, want, policy)
	}
	if p := c.SecurityContext.AllowPrivilegeEscalation; p == nil || *p {
		t.Errorf("allowPrivilegeEscalation must be false")
	}
	if strings.Join(c.SecurityContext.Capabilities.Drop, ",") != "ALL" {
		t.Errorf("capabilities drop %v, want [ALL]", c.SecurityContext.Capabilities.Drop)
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
