// Package nocgo checks what a build of the library's cgo packages without
// cgo reports: one error that says cgo and libnri.a are needed (nocgo.go
// in each package), not a package that builds without its API or a
// screenful of undefined names.
package nocgo

import (
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
)

// errorLine is how the compiler starts each error it reports.
var errorLine = regexp.MustCompile(`(?m)^\S+\.go:\d+:\d+: `)

func TestBuildWithoutCgoSaysWhy(t *testing.T) {
	for _, pkg := range []string{"./adaptation", "./generate"} {
		t.Run(pkg, func(t *testing.T) {
			cmd := exec.Command("go", "build", pkg)
			cmd.Dir = "../.." // the library module
			cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
			out, err := cmd.CombinedOutput()
			if err == nil {
				t.Fatalf("%s built with CGO_ENABLED=0", pkg)
			}
			errs := errorLine.FindAllString(string(out), -1)
			if len(errs) != 1 || !strings.Contains(string(out), "nri_rs_needs_cgo__set_CGO_ENABLED_1_and_link_libnri_a") {
				t.Fatalf("want the one nocgo.go error, got:\n%s", out)
			}
		})
	}
}
