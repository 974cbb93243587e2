package interop

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The nri-logger sample plugin, pre-installed with upstream's configuration
// keys, sets its annotation and environment variable and logs the events.
func TestLoggerSamplePlugin(t *testing.T) {
	bin := os.Getenv("NRI_RS_LOGGER_PLUGIN")
	if bin == "" {
		bin = "../../../target/debug/nri-logger"
	}
	data, err := os.ReadFile(bin)
	if err != nil {
		t.Fatalf("nri-logger missing (%v): run `cargo build --workspace` or `make test`", err)
	}
	r := newTestRuntime(t, nil, nil)
	logFile := filepath.Join(r.dir, "logger.log")
	if err := os.WriteFile(filepath.Join(r.dir, "plugins", "10-logger"), data, 0o755); err != nil {
		t.Fatal(err)
	}
	cfg := "logFile: " + logFile + "\nevents: [CreateContainer, RemovePodSandbox]\nsetAnnotation: logger.test/pid\naddEnv: LOGGER_ENV\n"
	if err := os.WriteFile(filepath.Join(r.dir, "conf.d", "10-logger.conf"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	r.start()

	pod := makePod(1, 0)
	ctr := makeContainer(pod, 1, 0)
	rsp := r.lifecycle(pod, ctr)
	adj := rsp.GetAdjust()
	if v := adj.GetAnnotations()["logger.test/pid"]; !strings.HasPrefix(v, "logger-pid-") {
		t.Errorf("annotation logger.test/pid = %q, want logger-pid-<pid> (adjustment %v)", v, adj)
	}
	// setAnnotation removes before setting; upstream keeps the removal
	// marker of an annotation in the merged adjustment.
	if _, marked := adj.GetAnnotations()["-logger.test/pid"]; !marked {
		t.Errorf("removal marker of setAnnotation missing: %v", adj.GetAnnotations())
	}
	envOK := false
	for _, kv := range adj.GetEnv() {
		envOK = envOK || (kv.Key == "LOGGER_ENV" && strings.HasPrefix(kv.Value, "logger-pid-"))
	}
	if !envOK {
		t.Errorf("env LOGGER_ENV missing from %v", adj.GetEnv())
	}

	// Only the subscribed events are logged, each with the container dumped.
	deadline := time.Now().Add(waitTimeout)
	var log string
	for time.Now().Before(deadline) {
		b, _ := os.ReadFile(logFile)
		log = string(b)
		if strings.Contains(log, "RemovePodSandbox: pod:") {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	for _, want := range []string{"CreateContainer: container:", "id: " + ctr.Id, "RemovePodSandbox: pod:"} {
		if !strings.Contains(log, want) {
			t.Errorf("logger output lacks %q:\n%s", want, log)
		}
	}
	for _, unwanted := range []string{"StartContainer:", "RunPodSandbox:"} {
		if strings.Contains(log, unwanted) {
			t.Errorf("logger logged unsubscribed event %q", unwanted)
		}
	}
}
