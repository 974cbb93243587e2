// Package ensure creates the empty spec sections a setter needs.
package ensure

// Ptr returns *p, first setting it to a new zero T if it is nil:
// Ptr(&Ptr(&spec.Linux).Resources) is spec.Linux.Resources, created
// with spec.Linux as needed.
func Ptr[T any](p **T) *T {
	if *p == nil {
		*p = new(T)
	}
	return *p
}

// Map returns *m, first making it if it is nil.
func Map[K comparable, V any](m *map[K]V) map[K]V {
	if *m == nil {
		*m = map[K]V{}
	}
	return *m
}
