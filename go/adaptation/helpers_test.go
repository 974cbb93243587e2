package adaptation

// WithTestNRIVersion overrides the NRI version the runtime reports to
// plugins, for tests (upstream has the same test-only option).
func WithTestNRIVersion(v string) Option {
	return func(r *Adaptation) error {
		r.nriVersion = v
		return nil
	}
}
