//go:build nri_no_wasm

package adaptation_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	nri "github.com/nri-rs/nri-rs/go/adaptation"
)

// Built with upstream's nri_no_wasm tag, the package says WASM support is
// disabled, and a module in the plugin directory is refused with the words
// of upstream's build with that tag (make test-go runs this file).
func TestNoWasmTagRefusesModules(t *testing.T) {
	rec := nri.RecordLog(t)

	dir := t.TempDir()
	// The smallest module: WASM's magic and version.
	require.NoError(t, os.WriteFile(filepath.Join(dir, "10-wasm"), []byte("\x00asm\x01\x00\x00\x00"), 0o755))
	r := newAdaptation(t, noSync, nri.WithPluginPath(dir), nri.WithWasmCacheDir(""))
	require.NoError(t, r.Start())
	r.Stop()
	assert.True(t, rec.Has(nri.ErrWasmDisabled.Error()), "log: %v", rec)
	assert.True(t, rec.Has("can't load WASM plugin") && rec.Has("no WASM support"), "log: %v", rec)
}
