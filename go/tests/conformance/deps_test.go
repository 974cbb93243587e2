package conformance_test

// Upstream's pkg/adaptation suite, which tests/conformance/run.sh runs in
// go/adaptation from the module cache (never committed), is written with
// ginkgo, gomega and go-cmp. The library module must not require them, so
// this module pins their versions: these imports keep them in this go.mod
// and go.sum (`go mod tidy` leaves them, CI's `go mod download` fetches
// them), and run.sh lends those requirements to the library module for the
// run through a temporary -modfile.
import (
	_ "github.com/google/go-cmp/cmp"
	_ "github.com/onsi/ginkgo/v2"
	_ "github.com/onsi/gomega"
)
