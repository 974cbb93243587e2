package wirecompat

import (
	"fmt"
	"math"
	"strings"

	"google.golang.org/protobuf/reflect/protoreflect"
)

// populator fills every field of a message, generically, by walking its
// descriptor, so that no field can be forgotten:
//
//   - scalars get distinct non-zero values, chosen to stress the encoding
//     (negative signed integers, unsigned ones with the top bit set,
//     non-ASCII strings);
//   - enums get their last value (repeated enums: the last ones, distinct);
//   - messages are filled recursively, up to maxDepth;
//   - repeated fields and maps get `entries` elements.
//
// Of a real oneof only the first member is set (NRI's API has none today).
type populator struct {
	maxDepth int
	entries  int
	counter  int64
	// truncated lists paths where maxDepth stopped the recursion.
	truncated []string
}

func newPopulator() *populator {
	return &populator{maxDepth: 16, entries: 3}
}

// fill populates m in place.
func (p *populator) fill(m protoreflect.Message) {
	p.fillAt(m, 0, string(m.Descriptor().Name()))
}

func (p *populator) next() int64 {
	p.counter++
	return p.counter
}

func (p *populator) fillAt(m protoreflect.Message, depth int, path string) {
	fields := m.Descriptor().Fields()
	for i := 0; i < fields.Len(); i++ {
		fd := fields.Get(i)
		if o := fd.ContainingOneof(); o != nil && !o.IsSynthetic() && o.Fields().Get(0) != fd {
			continue
		}
		fpath := path + "." + string(fd.Name())
		switch {
		case fd.IsMap():
			mp := m.Mutable(fd).Map()
			for j := 0; j < p.entries; j++ {
				key := p.mapKey(fd.MapKey(), j)
				mp.Set(key, p.value(mp.NewValue, fd.MapValue(), j, depth+1, fmt.Sprintf("%s[%v]", fpath, key)))
			}
		case fd.IsList():
			list := m.Mutable(fd).List()
			for j := 0; j < p.entries; j++ {
				list.Append(p.value(list.NewElement, fd, j, depth+1, fmt.Sprintf("%s[%d]", fpath, j)))
			}
		case fd.Message() != nil:
			if depth+1 > p.maxDepth {
				p.truncated = append(p.truncated, fpath)
				continue
			}
			p.fillAt(m.Mutable(fd).Message(), depth+1, fpath)
		default:
			m.Set(fd, p.scalar(fd, 0))
		}
	}
}

// value makes one element of a list or map; newValue makes a fresh message
// of the right type when the element is a message.
func (p *populator) value(newValue func() protoreflect.Value, fd protoreflect.FieldDescriptor, idx, depth int, path string) protoreflect.Value {
	if fd.Message() == nil {
		return p.scalar(fd, idx)
	}
	v := newValue()
	if depth > p.maxDepth {
		p.truncated = append(p.truncated, path)
		return v
	}
	p.fillAt(v.Message(), depth, path)
	return v
}

func (p *populator) mapKey(fd protoreflect.FieldDescriptor, idx int) protoreflect.MapKey {
	switch fd.Kind() {
	case protoreflect.StringKind:
		return protoreflect.ValueOfString(fmt.Sprintf("key-%d/%s-ü", p.next(), fd.ContainingMessage().Name())).MapKey()
	case protoreflect.BoolKind:
		return protoreflect.ValueOfBool(idx%2 == 0).MapKey()
	default:
		return p.scalar(fd, idx).MapKey()
	}
}

func (p *populator) scalar(fd protoreflect.FieldDescriptor, idx int) protoreflect.Value {
	n := p.next()
	switch fd.Kind() {
	case protoreflect.BoolKind:
		return protoreflect.ValueOfBool(true)
	case protoreflect.EnumKind:
		values := fd.Enum().Values()
		last := values.Len() - 1
		// The last value, then the ones before it; never the zero one
		// unless the enum has nothing else.
		i := last - idx%max(last, 1)
		return protoreflect.ValueOfEnum(values.Get(i).Number())
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind:
		v := int32(n * 1_000_003 % math.MaxInt32)
		if n%2 == 1 {
			v = -v
		}
		return protoreflect.ValueOfInt32(v)
	case protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind:
		v := n * 1_000_000_000_039
		if n%2 == 1 {
			v = -v
		}
		return protoreflect.ValueOfInt64(v)
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind:
		return protoreflect.ValueOfUint32(1<<31 + uint32(n))
	case protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		return protoreflect.ValueOfUint64(1<<63 + uint64(n))
	case protoreflect.FloatKind:
		return protoreflect.ValueOfFloat32(float32(n) + 0.5)
	case protoreflect.DoubleKind:
		return protoreflect.ValueOfFloat64(float64(n) + 0.25)
	case protoreflect.StringKind:
		return protoreflect.ValueOfString(fmt.Sprintf("%s-%d-ünïcødé✓", fd.Name(), n))
	case protoreflect.BytesKind:
		return protoreflect.ValueOfBytes([]byte{0, 0xff, byte(n), byte(n >> 8)})
	}
	panic(fmt.Sprintf("populator: unhandled kind %v of %s", fd.Kind(), fd.FullName()))
}

// unpopulated lists every field, anywhere in m, that is not set (or, for
// lists and maps, has fewer than minEntries elements); oneof members other
// than the one set are exempt.
func unpopulated(m protoreflect.Message, minEntries int) []string {
	var missing []string
	var walk func(m protoreflect.Message, path string)
	walk = func(m protoreflect.Message, path string) {
		fields := m.Descriptor().Fields()
		for i := 0; i < fields.Len(); i++ {
			fd := fields.Get(i)
			fpath := path + "." + string(fd.Name())
			if o := fd.ContainingOneof(); o != nil && !o.IsSynthetic() && m.WhichOneof(o) != fd {
				continue
			}
			if !m.Has(fd) {
				missing = append(missing, fpath)
				continue
			}
			switch {
			case fd.IsMap():
				mp := m.Get(fd).Map()
				if mp.Len() < minEntries {
					missing = append(missing, fmt.Sprintf("%s (only %d entries)", fpath, mp.Len()))
				}
				if fd.MapValue().Message() != nil {
					mp.Range(func(k protoreflect.MapKey, v protoreflect.Value) bool {
						walk(v.Message(), fmt.Sprintf("%s[%v]", fpath, k))
						return true
					})
				}
			case fd.IsList():
				list := m.Get(fd).List()
				if list.Len() < minEntries {
					missing = append(missing, fmt.Sprintf("%s (only %d elements)", fpath, list.Len()))
				}
				if fd.Message() != nil {
					for j := 0; j < list.Len(); j++ {
						walk(list.Get(j).Message(), fmt.Sprintf("%s[%d]", fpath, j))
					}
				}
			case fd.Message() != nil:
				walk(m.Get(fd).Message(), fpath)
			}
		}
	}
	walk(m, string(m.Descriptor().Name()))
	return missing
}

// countFields counts the populated leaf values in m (for logging).
func countFields(m protoreflect.Message) int {
	n := 0
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		switch {
		case fd.IsMap():
			v.Map().Range(func(_ protoreflect.MapKey, mv protoreflect.Value) bool {
				if fd.MapValue().Message() != nil {
					n += countFields(mv.Message())
				} else {
					n++
				}
				return true
			})
		case fd.IsList():
			for j := 0; j < v.List().Len(); j++ {
				if fd.Message() != nil {
					n += countFields(v.List().Get(j).Message())
				} else {
					n++
				}
			}
		case fd.Message() != nil:
			n += countFields(v.Message())
		default:
			n++
		}
		return true
	})
	return n
}

func joinLimited(items []string, limit int) string {
	if len(items) <= limit {
		return strings.Join(items, "\n")
	}
	return strings.Join(items[:limit], "\n") + fmt.Sprintf("\n... and %d more", len(items)-limit)
}
