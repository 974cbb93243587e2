package adaptation

// WithTestNRIVersion overrides the NRI version the runtime reports to
// plugins, for tests (upstream has the same test-only option).
func WithTestNRIVersion(v string) Option {
	return func(r *Adaptation) error {
		r.nriVersion = v
		return nil
	}
}

// CoreThreads counts the threads the core's runtimes have running in this
// process (the core counts them itself: a Go thread started from within a
// callback inherits the core thread's name, so /proc cannot tell them
// apart).
func CoreThreads() int { return coreThreads() }

// PluginClosed gives a function that tells whether the named plugin's
// connection is closed, for tests that wait for the adaptation to notice
// one (upstream has the same test-only method). Each call of it asks the
// core, without waiting for an event in progress.
func (r *Adaptation) PluginClosed(name string) func() bool {
	return func() bool { return !r.hasPlugin(name) }
}
