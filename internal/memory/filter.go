package memory

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// Indexed key types (SPEC §4.6).
const (
	KeyString     = "STRING"
	KeyStringList = "STRINGLIST"
	KeyNumber     = "NUMBER"
	// KeyDatetime is the type of the always-filterable createdAt and
	// updatedAt keys; it cannot be declared.
	KeyDatetime = "DATETIME"
)

// Limits on filters (SPEC §4.6).
const (
	MaxIndexedKeys = 10
	MaxFilters     = 5
)

// Always-filterable record timestamps.
const (
	KeyCreatedAt = "createdAt"
	KeyUpdatedAt = "updatedAt"
)

// IndexedKey declares a filterable metadata key (memory.indexedKeys).
type IndexedKey struct {
	Name string `json:"name"`
	Type string `json:"type"` // STRING, STRINGLIST or NUMBER
}

// DefaultIndexedKeys are Sprout's: type and section (STRING), plants
// (STRINGLIST).
func DefaultIndexedKeys() []IndexedKey {
	return []IndexedKey{{"type", KeyString}, {"section", KeyString}, {"plants", KeyStringList}}
}

// ErrInvalidFilter is wrapped by every filter validation error: an
// undeclared key, too many filters, an operator that does not fit the key's
// type, or a value of the wrong type.
var ErrInvalidFilter = errors.New("memory: invalid filter")

// ErrInvalidQuery is wrapped by query validation errors other than filters.
var ErrInvalidQuery = errors.New("memory: invalid query")

// ValidateIndexedKeys checks a declaration: at most 10 keys, unique
// non-empty names that are not createdAt/updatedAt, known types.
func ValidateIndexedKeys(keys []IndexedKey) error {
	if len(keys) > MaxIndexedKeys {
		return fmt.Errorf("%w: %d indexed keys declared, at most %d", ErrInvalidFilter, len(keys), MaxIndexedKeys)
	}
	seen := map[string]bool{}
	for _, k := range keys {
		if k.Name == "" || k.Name == KeyCreatedAt || k.Name == KeyUpdatedAt {
			return fmt.Errorf("%w: indexed key name %q is reserved or empty", ErrInvalidFilter, k.Name)
		}
		if seen[k.Name] {
			return fmt.Errorf("%w: indexed key %q declared twice", ErrInvalidFilter, k.Name)
		}
		seen[k.Name] = true
		switch keyType(k.Type) {
		case KeyString, KeyStringList, KeyNumber:
		default:
			return fmt.Errorf("%w: indexed key %q has unknown type %q", ErrInvalidFilter, k.Name, k.Type)
		}
	}
	return nil
}

func keyType(t string) string {
	if t == "" {
		return KeyString
	}
	return strings.ToUpper(t)
}

// FilterKeyType returns the type of key under the declaration keys, or
// ErrInvalidFilter when the key is undeclared.
func FilterKeyType(key string, keys []IndexedKey) (string, error) {
	if key == KeyCreatedAt || key == KeyUpdatedAt {
		return KeyDatetime, nil
	}
	for _, k := range keys {
		if k.Name == key {
			return keyType(k.Type), nil
		}
	}
	return "", fmt.Errorf("%w: key %q is not a declared indexed key", ErrInvalidFilter, key)
}

// opTypes lists, per operator, the key types it applies to.
var opTypes = map[string][]string{
	OpEquals:    {KeyString, KeyStringList, KeyNumber, KeyDatetime},
	OpContains:  {KeyString, KeyStringList},
	OpExists:    {KeyString, KeyStringList, KeyNumber, KeyDatetime},
	OpNotExists: {KeyString, KeyStringList, KeyNumber, KeyDatetime},
	OpBefore:    {KeyDatetime},
	OpAfter:     {KeyDatetime},
	OpGreater:   {KeyNumber, KeyDatetime},
	OpGreaterEq: {KeyNumber, KeyDatetime},
	OpLess:      {KeyNumber, KeyDatetime},
	OpLessEq:    {KeyNumber, KeyDatetime},
}

// Operators lists every filter operator.
func Operators() []string {
	return []string{OpEquals, OpContains, OpExists, OpNotExists, OpBefore, OpAfter, OpGreater, OpGreaterEq, OpLess, OpLessEq}
}

// ValidateFilters checks up to 5 filters against the declared keys and
// returns them with values coerced to the key's type (string → number or
// RFC 3339 time as needed). Errors wrap ErrInvalidFilter.
func ValidateFilters(filters []Filter, keys []IndexedKey) ([]Filter, error) {
	if len(filters) > MaxFilters {
		return nil, fmt.Errorf("%w: %d filters, at most %d", ErrInvalidFilter, len(filters), MaxFilters)
	}
	out := make([]Filter, 0, len(filters))
	for _, f := range filters {
		kt, err := FilterKeyType(f.Key, keys)
		if err != nil {
			return nil, err
		}
		op := strings.ToUpper(f.Op)
		types, ok := opTypes[op]
		if !ok {
			return nil, fmt.Errorf("%w: unknown operator %q", ErrInvalidFilter, f.Op)
		}
		fits := false
		for _, t := range types {
			fits = fits || t == kt
		}
		if !fits {
			return nil, fmt.Errorf("%w: operator %s does not apply to %s key %q", ErrInvalidFilter, op, kt, f.Key)
		}
		f.Op = op
		if op != OpExists && op != OpNotExists {
			v, err := coerceValue(f.Value, kt)
			if err != nil {
				return nil, fmt.Errorf("%w: key %q: %v", ErrInvalidFilter, f.Key, err)
			}
			f.Value = v
		} else {
			f.Value = nil
		}
		out = append(out, f)
	}
	return out, nil
}

func coerceValue(v any, kt string) (any, error) {
	switch kt {
	case KeyNumber:
		switch x := v.(type) {
		case float64:
			if math.IsNaN(x) {
				return nil, errors.New("NaN is not a number value")
			}
			return x, nil
		case int:
			return float64(x), nil
		case int64:
			return float64(x), nil
		case string:
			n, err := strconv.ParseFloat(strings.TrimSpace(x), 64)
			if err != nil || math.IsNaN(n) {
				return nil, fmt.Errorf("%q is not a number", x)
			}
			return n, nil
		}
	case KeyDatetime:
		switch x := v.(type) {
		case time.Time:
			return x, nil
		case string:
			return parseTime(x)
		}
	case KeyString:
		if s, ok := v.(string); ok {
			return s, nil
		}
	case KeyStringList:
		switch x := v.(type) {
		case string:
			return x, nil
		case []string:
			return x, nil
		case []any:
			return toStrings(x)
		}
	}
	return nil, fmt.Errorf("value %v (%T) does not fit type %s", v, v, kt)
}

func parseTime(s string) (time.Time, error) {
	s = strings.TrimSpace(s)
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04:05", "2006-01-02"} {
		if t, err := time.Parse(layout, s); err == nil {
			return t, nil
		}
	}
	return time.Time{}, fmt.Errorf("%q is not an RFC 3339 time or YYYY-MM-DD date", s)
}

func toStrings(xs []any) ([]string, error) {
	out := make([]string, 0, len(xs))
	for _, x := range xs {
		s, ok := x.(string)
		if !ok {
			return nil, fmt.Errorf("list element %v is not a string", x)
		}
		out = append(out, s)
	}
	return out, nil
}

// NormalizeMetadata converts metadata values to the canonical types:
// string, []string, float64 or time.Time (ints become float64, []any of
// strings becomes []string). Other values are an error.
func NormalizeMetadata(md map[string]any) (map[string]any, error) {
	if len(md) == 0 {
		return nil, nil
	}
	out := make(map[string]any, len(md))
	for k, v := range md {
		switch x := v.(type) {
		case string, float64, time.Time:
			out[k] = x
		case []string:
			out[k] = append([]string(nil), x...)
		case []any:
			ss, err := toStrings(x)
			if err != nil {
				return nil, fmt.Errorf("metadata %q: %w", k, err)
			}
			out[k] = ss
		case int:
			out[k] = float64(x)
		case int64:
			out[k] = float64(x)
		case float32:
			out[k] = float64(x)
		case bool:
			out[k] = strconv.FormatBool(x)
		case nil:
		default:
			return nil, fmt.Errorf("metadata %q: unsupported value type %T", k, v)
		}
	}
	return out, nil
}

// MatchFilters reports whether rec satisfies every (validated) filter.
func MatchFilters(rec Record, filters []Filter) bool {
	for _, f := range filters {
		if !matchFilter(rec, f) {
			return false
		}
	}
	return true
}

func matchFilter(rec Record, f Filter) bool {
	var v any
	var present bool
	switch f.Key {
	case KeyCreatedAt:
		v, present = rec.CreatedAt, true
	case KeyUpdatedAt:
		v, present = rec.UpdatedAt, true
	default:
		v, present = rec.Metadata[f.Key]
	}
	switch f.Op {
	case OpExists:
		return present
	case OpNotExists:
		return !present
	}
	if !present {
		return false
	}
	switch x := v.(type) {
	case string:
		want, ok := f.Value.(string)
		if !ok {
			return false
		}
		switch f.Op {
		case OpEquals:
			return x == want
		case OpContains:
			return strings.Contains(strings.ToLower(x), strings.ToLower(want))
		}
	case []string:
		wants, ok := f.Value.([]string)
		if !ok {
			s, isStr := f.Value.(string)
			if !isStr {
				return false
			}
			wants = []string{s}
		}
		switch f.Op {
		case OpEquals:
			if _, isList := f.Value.([]string); isList {
				return equalStrings(x, wants)
			}
			return containsAll(x, wants)
		case OpContains:
			return containsAll(x, wants)
		}
	case float64:
		want, ok := f.Value.(float64)
		if !ok {
			return false
		}
		return compare(cmpFloat(x, want), f.Op)
	case time.Time:
		want, ok := f.Value.(time.Time)
		if !ok {
			return false
		}
		return compare(x.Compare(want), f.Op)
	}
	return false
}

func cmpFloat(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func compare(c int, op string) bool {
	switch op {
	case OpEquals:
		return c == 0
	case OpBefore, OpLess:
		return c < 0
	case OpAfter, OpGreater:
		return c > 0
	case OpGreaterEq:
		return c >= 0
	case OpLessEq:
		return c <= 0
	}
	return false
}

func containsAll(have, want []string) bool {
	for _, w := range want {
		found := false
		for _, h := range have {
			if strings.EqualFold(h, w) {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// ParseFilter parses the CLI form "key:OP:value" (value may contain ":";
// EXISTS and NOT_EXISTS take no value). The value stays a string; it is
// coerced by ValidateFilters.
func ParseFilter(s string) (Filter, error) {
	parts := strings.SplitN(s, ":", 3)
	if len(parts) < 2 || parts[0] == "" {
		return Filter{}, fmt.Errorf("%w: %q is not key:OP:value", ErrInvalidFilter, s)
	}
	f := Filter{Key: parts[0], Op: strings.ToUpper(parts[1])}
	if len(parts) == 3 {
		f.Value = parts[2]
	}
	return f, nil
}
