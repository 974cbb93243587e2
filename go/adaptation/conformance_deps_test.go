package adaptation_test

// Upstream's pkg/adaptation suite (run by tests/conformance/run.sh from the
// module cache, never committed) is written with ginkgo and gomega. These
// imports keep both in go.mod and go.sum, so `go mod tidy` leaves them and
// CI's `go mod download` fetches them.
import (
	_ "github.com/onsi/ginkgo/v2"
	_ "github.com/onsi/gomega"
)
