package adaptation

import "time"

// Metrics is the interface a runtime implements to collect plugin
// metrics. The core calls it while events are dispatched, from its own
// thread or, for an event that waits for one plugin, from the goroutine's
// thread that called the event, so implementations should be quick.
type Metrics interface {
	// RecordPluginInvocation records a call made to a plugin; err is its error, if any.
	RecordPluginInvocation(pluginName, operation string, err error)
	// RecordPluginLatency records how long a call to a plugin took.
	RecordPluginLatency(pluginName, operation string, latency time.Duration)
	// RecordPluginAdjustments records a plugin's adjustment (nil if it made
	// none) and how many updates and evictions it asked for.
	RecordPluginAdjustments(pluginName, operation string, adjust *ContainerAdjustment, updates, evicts int)
	// UpdatePluginCount records the number of active plugins.
	UpdatePluginCount(count int)
}
