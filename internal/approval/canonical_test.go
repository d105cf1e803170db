package approval

import (
	"encoding/json"
	"errors"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
)

// RFC 8785 Appendix B: IEEE-754 bit patterns and their canonical text.
func TestRFC8785Numbers(t *testing.T) {
	tests := []struct{ bits, want string }{
		{"0000000000000000", "0"},
		{"8000000000000000", "0"},
		{"0000000000000001", "5e-324"},
		{"8000000000000001", "-5e-324"},
		{"7fefffffffffffff", "1.7976931348623157e+308"},
		{"ffefffffffffffff", "-1.7976931348623157e+308"},
		{"4340000000000000", "9007199254740992"},
		{"c340000000000000", "-9007199254740992"},
		{"4430000000000000", "295147905179352830000"},
		{"44b52d02c7e14af5", "9.999999999999997e+22"},
		{"44b52d02c7e14af6", "1e+23"},
		{"44b52d02c7e14af7", "1.0000000000000001e+23"},
		{"444b1ae4d6e2ef4e", "999999999999999700000"},
		{"444b1ae4d6e2ef4f", "999999999999999900000"},
		{"444b1ae4d6e2ef50", "1e+21"},
		{"3eb0c6f7a0b5ed8c", "9.999999999999997e-7"},
		{"3eb0c6f7a0b5ed8d", "0.000001"},
		{"41b3de4355555553", "333333333.3333332"},
		{"41b3de4355555554", "333333333.33333325"},
		{"41b3de4355555555", "333333333.3333333"},
		{"41b3de4355555556", "333333333.3333334"},
		{"41b3de4355555557", "333333333.33333343"},
		{"becbf647612f3696", "-0.0000033333333333333333"},
		{"43143ff3c1cb0959", "1424953923781206.2"},
	}
	for _, tt := range tests {
		u, _ := strconv.ParseUint(tt.bits, 16, 64)
		f := math.Float64frombits(u)
		if got := FormatNumber(f); got != tt.want {
			t.Errorf("FormatNumber(%s) = %s, want %s", tt.bits, got, tt.want)
		}
		// And through the parser: the canonical text is a fixed point.
		if f != 0 || tt.want == "0" {
			c, err := Canonical(json.RawMessage(tt.want))
			if err != nil || string(c) != tt.want {
				t.Errorf("Canonical(%s) = %s, %v", tt.want, c, err)
			}
		}
	}
	// NaN and Infinity (7fffffffffffffff, 7ff0000000000000) are not JSON;
	// literals that overflow to Infinity are rejected.
	for _, in := range []string{"NaN", "Infinity", "-Infinity", "1e400", "-1e400", `{"a":1e999}`} {
		if _, err := Canonical(json.RawMessage(in)); !errors.Is(err, ErrNotCanonicalizable) {
			t.Errorf("Canonical(%s) err = %v, want ErrNotCanonicalizable", in, err)
		}
	}
}

// RFC 8785 §3.2.2 sample.
func TestRFC8785Sample(t *testing.T) {
	in := `{
  "numbers": [333333333.33333329, 1E30, 4.50, 2e-3, 0.000000000000000000000000001],
  "string": "\u20ac$\u000F\u000aA'\u0042\u0022\u005c\\\"\/",
  "literals": [null, true, false]
}`
	want := `{"literals":[null,true,false],"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],"string":"€$\u000f\nA'B\"\\\\\"/"}`
	got, err := Canonical(json.RawMessage(in))
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
}

// RFC 8785 §3.2.3: sorting by UTF-16 code units (the emoji's high surrogate
// D83D sorts before U+FB33).
func TestRFC8785Sorting(t *testing.T) {
	in := `{
  "\u20ac": "Euro Sign",
  "\r": "Carriage Return",
  "\ufb33": "Hebrew Letter Dalet With Dagesh",
  "1": "One",
  "\ud83d\ude00": "Emoji: Grinning Face",
  "\u0080": "Control",
  "\u00f6": "Latin Small Letter O With Diaeresis"
}`
	want := "{\"\\r\":\"Carriage Return\",\"1\":\"One\",\"\u0080\":\"Control\",\"ö\":\"Latin Small Letter O With Diaeresis\"," +
		"\"€\":\"Euro Sign\",\"😀\":\"Emoji: Grinning Face\",\"\ufb33\":\"Hebrew Letter Dalet With Dagesh\"}"
	got, err := Canonical(json.RawMessage(in))
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
}

func TestCanonicalRejects(t *testing.T) {
	bad := []string{
		``, ` `, `{`, `{"a":1,}`, `[1,]`, `{"a":1,"a":2}`, `{"a":{"b":1,"b":1}}`, `01`, `1.`, `.5`, `+1`, `1e`, `--1`,
		`"\ud800"`, `"\udc00"`, `"\ud800\u0041"`, "\"\xff\"", "\"\xed\xa0\x80\"", "\"a\x01b\"", `"\x"`, `tru`, `nul`,
		`{"a" 1}`, `{1:2}`, `[1 2]`, `{} {}`, `"abc`, `"\u12"`, strings.Repeat("[", 300) + strings.Repeat("]", 300),
	}
	for _, in := range bad {
		if c, err := Canonical(json.RawMessage(in)); !errors.Is(err, ErrNotCanonicalizable) {
			t.Errorf("Canonical(%q) = %q, %v; want error", in, c, err)
		}
	}
}

func TestCanonicalForms(t *testing.T) {
	tests := []struct{ in, want string }{
		{` { "b" : [ 1 , 2.0 , -0 , 1e2 ] , "a" : "x" } `, `{"a":"x","b":[1,2,0,100]}`},
		{`"\u00e9\u2028<>&"`, "\"é\u2028<>&\""},
		{`"\u001f\u007f"`, "\"\\u001f\u007f\""},
		{`"\b\f\n\r\t\/"`, `"\b\f\n\r\t/"`},
		{`{"":{"":[]}}`, `{"":{"":[]}}`},
		{`1E-7`, `1e-7`},
		{`123456789012345678901234567890`, `1.2345678901234568e+29`},
	}
	for _, tt := range tests {
		got, err := Canonical(json.RawMessage(tt.in))
		if err != nil || string(got) != tt.want {
			t.Errorf("Canonical(%s) = %s, %v; want %s", tt.in, got, err, tt.want)
		}
	}
	// Empty args hash as {}.
	a, _ := ArgsHash(nil)
	b, _ := ArgsHash(json.RawMessage(`{ }`))
	if a != b || len(a) != 64 {
		t.Fatalf("ArgsHash(nil)=%s ArgsHash({ })=%s", a, b)
	}
}

// shuffle re-serialises a JSON value with object members in random order
// and random whitespace.
func shuffle(r *rand.Rand, v any) string {
	ws := func() string { return []string{"", " ", "\n", "\t "}[r.IntN(4)] }
	switch x := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		r.Shuffle(len(keys), func(i, j int) { keys[i], keys[j] = keys[j], keys[i] })
		var b strings.Builder
		b.WriteString("{" + ws())
		for i, k := range keys {
			if i > 0 {
				b.WriteString("," + ws())
			}
			kb, _ := json.Marshal(k)
			b.WriteString(string(kb) + ws() + ":" + ws() + shuffle(r, x[k]))
		}
		b.WriteString(ws() + "}")
		return b.String()
	case []any:
		var b strings.Builder
		b.WriteString("[")
		for i, e := range x {
			if i > 0 {
				b.WriteString(",")
			}
			b.WriteString(ws() + shuffle(r, e))
		}
		return b.String() + "]"
	default:
		bs, _ := json.Marshal(x)
		return string(bs)
	}
}

// FuzzArgsHashKeyOrder: the same value serialised with any key order and
// whitespace hashes the same.
func FuzzArgsHashKeyOrder(f *testing.F) {
	f.Add(`{"city":"Seoul","days":3,"units":{"t":"C","w":"kmh"}}`, uint64(1))
	f.Add(`{"b":[1,{"z":null,"a":true}],"a":"\u00e9","€":1.5e3}`, uint64(2))
	f.Add(`{"\ud83d\ude00":1,"\ufb33":2,"a":{"c":[],"b":{}}}`, uint64(3))
	f.Fuzz(func(t *testing.T, in string, seed uint64) {
		var v any
		if json.Unmarshal([]byte(in), &v) != nil {
			return
		}
		h1, err := ArgsHash(json.RawMessage(in))
		if err != nil {
			return // not I-JSON (duplicate keys, lone surrogates, …)
		}
		r := rand.New(rand.NewPCG(seed, seed^0x9e37))
		for i := 0; i < 4; i++ {
			alt := shuffle(r, v)
			h2, err := ArgsHash(json.RawMessage(alt))
			if err != nil {
				t.Fatalf("reordered form %s rejected: %v", alt, err)
			}
			if h1 != h2 {
				t.Fatalf("hash differs for %s vs %s", in, alt)
			}
		}
		// Canonical is idempotent.
		c, _ := Canonical(json.RawMessage(in))
		c2, err := Canonical(c)
		if err != nil || string(c) != string(c2) {
			t.Fatalf("not idempotent: %s → %s (%v)", c, c2, err)
		}
	})
}

// FuzzCanonical never panics, and accepted input re-parses as equal JSON.
func FuzzCanonical(f *testing.F) {
	for _, s := range []string{`{}`, `[1,2]`, `"\ud83d\ude00"`, `{"a":1e308}`, `-0.0`, `[[[[`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		c, err := Canonical(json.RawMessage(in))
		if err != nil {
			return
		}
		if !json.Valid(c) {
			t.Fatalf("output not valid JSON: %q", c)
		}
	})
}
