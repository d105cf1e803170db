package config

import (
	"bytes"
	"encoding"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"unicode/utf8"

	"github.com/tailscale/hujson"
)

// fileSource is a parsed config file and where each key's value is in it,
// so that an error can name the file, line and column.
type fileSource struct {
	path string
	data []byte         // the file; Standardize blanks comments in it but keeps line breaks and offsets
	at   map[string]int // key path ("model.timeout") → byte offset of its value
}

// parseFile parses b, the HuJSON file at path, and checks it against
// Config. A syntax error, an unknown key, a key set twice in one object or
// a value of the wrong type is an error
// "<path>:<line>:<column>: <key path>: <what is wrong>" (no key path for a
// syntax error). It returns the file as standard JSON.
func parseFile(path string, b []byte) (*fileSource, []byte, error) {
	v, err := hujson.Parse(b)
	if err != nil {
		return nil, nil, syntaxError(path, err)
	}
	f := &fileSource{path: path, data: b, at: map[string]int{}}
	if err := f.check(&v, reflect.TypeFor[Config](), ""); err != nil {
		return nil, nil, err
	}
	v.Standardize()
	return f, v.Pack(), nil
}

// syntaxError turns hujson's "hujson: line L, column C: msg" into
// "<path>:L:C: msg".
func syntaxError(path string, err error) error {
	var line, col int
	inner := errors.Unwrap(err)
	if _, serr := fmt.Sscanf(err.Error(), "hujson: line %d, column %d:", &line, &col); serr != nil || inner == nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return fmt.Errorf("%s:%d:%d: %w", path, line, col, inner)
}

// position returns the 1-based line and byte column of offset off.
func (f *fileSource) position(off int) (line, col int) {
	before := f.data[:min(off, len(f.data))]
	line = 1 + bytes.Count(before, []byte("\n"))
	col = 1 + len(before) - (bytes.LastIndexByte(before, '\n') + 1)
	return line, col
}

// errorf returns "<path>:<line>:<column>: <key>: <format>" for the value or
// key at offset off; key "" is the whole file.
func (f *fileSource) errorf(off int, key, format string, args ...any) error {
	line, col := f.position(off)
	prefix := fmt.Sprintf("%s:%d:%d: ", f.path, line, col)
	if key != "" {
		prefix += key + ": "
	}
	return fmt.Errorf("%s"+format, append([]any{prefix}, args...)...)
}

var (
	jsonUnmarshaler = reflect.TypeFor[json.Unmarshaler]()
	textUnmarshaler = reflect.TypeFor[encoding.TextUnmarshaler]()
)

// check walks v, the value of key (a key path, "" for the file), as
// encoding/json would decode it into a t, and records where each key's
// value starts. Struct keys match the json tag exactly or, as in
// encoding/json, case-insensitively; map keys are themselves. Config has
// no embedded structs, so promoted fields are not looked for.
func (f *fileSource) check(v *hujson.Value, t reflect.Type, key string) error {
	if key != "" {
		f.at[key] = v.StartOffset
	}
	if pt := reflect.PointerTo(t); pt.Implements(jsonUnmarshaler) || pt.Implements(textUnmarshaler) {
		return f.checkLeaf(v, t, key)
	}
	switch t.Kind() {
	case reflect.Pointer:
		return f.check(v, t.Elem(), key)
	case reflect.Struct, reflect.Map, reflect.Slice, reflect.Array:
	default:
		return f.checkLeaf(v, t, key)
	}
	switch x := v.Value.(type) {
	case *hujson.Object:
		switch t.Kind() {
		case reflect.Struct:
			return f.checkStruct(x, t, key)
		case reflect.Map:
			return f.checkMap(x, t, key)
		}
	case *hujson.Array:
		if t.Kind() == reflect.Slice || t.Kind() == reflect.Array {
			for i := range x.Elements {
				if err := f.check(&x.Elements[i], t.Elem(), fmt.Sprintf("%s[%d]", key, i)); err != nil {
					return err
				}
			}
			return nil
		}
	case hujson.Literal:
		if x.Kind() == 'n' {
			return nil // encoding/json leaves the default
		}
	}
	return f.errorf(v.StartOffset, key, "want %s, got %s", describeType(t), describeValue(v))
}

func (f *fileSource) checkStruct(obj *hujson.Object, t reflect.Type, key string) error {
	first := map[int]int{} // field index → offset of the key that set it
	for i := range obj.Members {
		m := &obj.Members[i]
		name := m.Name.Value.(hujson.Literal).String()
		idx, ok := fieldIndex(t, name)
		if !ok {
			return f.errorf(m.Name.StartOffset, join(key, name), "unknown key%s", suggest(t, name))
		}
		path := join(key, jsonName(t.Field(idx)))
		if off, dup := first[idx]; dup {
			return f.duplicate(m.Name.StartOffset, off, path)
		}
		first[idx] = m.Name.StartOffset
		if err := f.check(&m.Value, t.Field(idx).Type, path); err != nil {
			return err
		}
	}
	return nil
}

func (f *fileSource) checkMap(obj *hujson.Object, t reflect.Type, key string) error {
	first := map[string]int{}
	for i := range obj.Members {
		m := &obj.Members[i]
		name := m.Name.Value.(hujson.Literal).String()
		path := join(key, name)
		if off, dup := first[name]; dup {
			return f.duplicate(m.Name.StartOffset, off, path)
		}
		first[name] = m.Name.StartOffset
		if err := f.check(&m.Value, t.Elem(), path); err != nil {
			return err
		}
	}
	return nil
}

// duplicate refuses a key set twice in one object: encoding/json would
// silently keep the later value (or merge two objects).
func (f *fileSource) duplicate(off, firstOff int, key string) error {
	line, col := f.position(firstOff)
	return f.errorf(off, key, "duplicate key (first at line %d, column %d)", line, col)
}

// checkLeaf decodes v into a new t, as Load's decode will.
func (f *fileSource) checkLeaf(v *hujson.Value, t reflect.Type, key string) error {
	var raw []byte
	if lit, ok := v.Value.(hujson.Literal); ok {
		raw = lit
	} else {
		c := v.Clone() // a Duration given an object: its comments must go
		c.Standardize()
		raw = c.Pack()
	}
	err := json.Unmarshal(raw, reflect.New(t).Interface())
	if err == nil {
		return nil
	}
	if te := (*json.UnmarshalTypeError)(nil); errors.As(err, &te) {
		return f.errorf(v.StartOffset, key, "want %s, got %s", describeType(t), describeValue(v))
	}
	return f.errorf(v.StartOffset, key, "%w", err)
}

// fieldIndex finds the field of struct t that the JSON key name sets: an
// exact match of its json name, else the first case-insensitive one.
func fieldIndex(t reflect.Type, name string) (int, bool) {
	fold := -1
	for i := range t.NumField() {
		sf := t.Field(i)
		n := jsonName(sf)
		if n == "" {
			continue
		}
		if n == name {
			return i, true
		}
		if fold < 0 && strings.EqualFold(n, name) {
			fold = i
		}
	}
	return fold, fold >= 0
}

// jsonName is the key encoding/json uses for sf, "" for none.
func jsonName(sf reflect.StructField) string {
	if !sf.IsExported() {
		return ""
	}
	tag := sf.Tag.Get("json")
	if tag == "-" {
		return ""
	}
	if n, _, _ := strings.Cut(tag, ","); n != "" {
		return n
	}
	return sf.Name
}

// suggest returns " (did you mean X?)" for the key of struct t closest to
// name, if one is within two edits, else "".
func suggest(t reflect.Type, name string) string {
	best, bestD := "", 3
	for i := range t.NumField() {
		n := jsonName(t.Field(i))
		if n == "" {
			continue
		}
		if d := editDistance(strings.ToLower(n), strings.ToLower(name)); d < bestD {
			best, bestD = n, d
		}
	}
	if best == "" {
		return ""
	}
	return fmt.Sprintf(" (did you mean %s?)", best)
}

// editDistance is the Levenshtein distance between a and b, in runes.
func editDistance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	prev := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur := make([]int, len(rb)+1)
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	return prev[len(rb)]
}

func join(key, name string) string {
	if key == "" {
		return name
	}
	return key + "." + name
}

// describeType names what a JSON value for t must be.
func describeType(t reflect.Type) string {
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return "a whole number"
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "a whole number, 0 or more"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.Map, reflect.Struct:
		return "an object"
	case reflect.Pointer:
		return describeType(t.Elem())
	}
	return t.String()
}

// describeValue names the JSON value v: "an object", "an array", "string
// \"3\"" (cut to 40 characters), or the literal itself.
func describeValue(v *hujson.Value) string {
	switch x := v.Value.(type) {
	case *hujson.Object:
		return "an object"
	case *hujson.Array:
		return "an array"
	case hujson.Literal:
		if x.Kind() == '"' {
			s := x.String()
			if utf8.RuneCountInString(s) > 40 {
				s = string([]rune(s)[:40]) + "…"
			}
			return fmt.Sprintf("string %q", s)
		}
		return string(x)
	}
	return "a value"
}

// sources says where each value in effect came from: the environment,
// the file (when there is one) or the defaults.
type sources struct {
	file   *fileSource
	getenv func(string) string
}

// name returns key as an error should name it: "key (from ENV)" when the
// environment variable env ("" for none) set it, "<path>:<line>:<column>:
// key" when the file did, else key (a default).
func (s sources) name(key, env string) string {
	if env != "" && s.getenv(env) != "" {
		return key + " (from " + env + ")"
	}
	if s.file != nil {
		if off, ok := s.file.at[key]; ok {
			line, col := s.file.position(off)
			return fmt.Sprintf("%s:%d:%d: %s", s.file.path, line, col, key)
		}
	}
	return key
}
