package generate_test

// A runtime links this package and go/adaptation into one binary: both are
// cgo over libnri.a, and their C shims and exported callbacks must not
// clash. This test binary links both.

import (
	"testing"

	"github.com/containerd/nri/pkg/api"

	"github.com/nri-rs/nri-rs/go/adaptation"
	"github.com/nri-rs/nri-rs/go/generate"
	"github.com/nri-rs/nri-rs/go/generate/internal/testgen"
)

func TestLinksWithTheAdaptation(t *testing.T) {
	if adaptation.DefaultPluginPath == "" {
		t.Fatal("no adaptation")
	}
	spec := baseSpec()
	g := generate.SpecGenerator(testgen.New(spec))
	if err := g.AdjustResources(&api.LinuxResources{Pids: &api.LinuxPids{Limit: 5}}); err != nil {
		t.Fatal(err)
	}
	if *spec.Linux.Resources.Pids.Limit != 5 {
		t.Fatal("not adjusted")
	}
}
