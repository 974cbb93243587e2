package adaptation

import (
	"context"
	"fmt"
)

// DeprecationRecorder is the interface for recording NRI deprecation warnings.
type DeprecationRecorder interface {
	// PluginWarning records a warning for a plugin.
	PluginWarning(ctx context.Context, d Deprecation, plugin, details string)
}

// Deprecation is the type for NRI deprecations. The values are those of
// the core's nri_deprecation.
type Deprecation int

const (
	// DeprecatedStateChange indicates that a plugin does not implement per
	// request RPC calls, using the deprecated StateChange instead.
	DeprecatedStateChange Deprecation = iota + 1
)

func (d Deprecation) String() string {
	switch d {
	case DeprecatedStateChange:
		return "deprecated StateChange"
	default:
		return fmt.Sprintf("unknown deprecation (%d)", d)
	}
}
