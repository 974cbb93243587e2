package adaptation

import (
	"context"
	"fmt"
)

// DeprecationRecorder is told when a plugin relies on a deprecated NRI
// feature, once per plugin, feature and event (see WithDeprecationRecorder).
type DeprecationRecorder interface {
	// PluginWarning reports that plugin uses deprecation d; details says how.
	PluginWarning(ctx context.Context, d Deprecation, plugin, details string)
}

// Deprecation names a deprecated NRI feature a plugin still uses. The values
// are those of the core's nri_deprecation.
type Deprecation int

const (
	// DeprecatedStateChange means a plugin has no dedicated RPC for an event
	// and is sent it through the old StateChange call instead.
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
