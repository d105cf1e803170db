package config

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestFileErrorsNamePlaceAndKey: an error in tendril.json is
// "<file>:<line>:<column>: <key path>: <what is wrong>", and a bad value
// is blamed on where it came from, the file or the environment.
func TestFileErrorsNamePlaceAndKey(t *testing.T) {
	const portHint = `missing port in address (want host:port, e.g. 127.0.0.1:8080)`
	for _, tc := range []struct {
		name string
		file string
		env  map[string]string
		want string // the whole error; $FILE is the file's path
	}{
		// unknown keys and wrong types name line, column and key path
		{"unknown key", "{\n  \"model\": {\n    \"timeot\": \"2m\"\n  }\n}",
			nil, `$FILE:3:5: model.timeot: unknown key (did you mean timeout?)`},
		{"unknown key no hint", `{"zzz": 1}`, nil, `$FILE:1:2: zzz: unknown key`},
		{"string for int", "{\n  \"model\": {\"maxRetries\": \"3\"}\n}",
			nil, `$FILE:2:27: model.maxRetries: want a whole number, got string "3"`},
		{"fraction for int", "// a comment\n{\n  /* x */ \"model\": {\"maxTokens\": 1.5},\n}",
			nil, `$FILE:3:34: model.maxTokens: want a whole number, got 1.5`},
		{"string for object", `{"model": "openai/gpt"}`, nil, `$FILE:1:11: model: want an object, got string "openai/gpt"`},
		{"array element", `{"telegram": {"allowedChatIds": [1, "x"]}}`,
			nil, `$FILE:1:37: telegram.allowedChatIds[1]: want a whole number, got string "x"`},
		{"map value", `{"session": {"channelOverrides": {"dm": {"maxHistoryTokens": true}}}}`,
			nil, `$FILE:1:62: session.channelOverrides.dm.maxHistoryTokens: want a whole number, got true`},
		{"syntax", `{"addr": }`, nil, `$FILE:1:10: invalid character '}' at start of value`},
		{"checked after decoding", `{"model": {"maxRetries": -3}}`, nil, `$FILE:1:26: model.maxRetries is negative: want 0 or more`},
		// a bad duration names its key
		{"bad duration", "{\n  \"model\": {\n    \"timeout\": \"banana\"\n  }\n}",
			nil, `$FILE:3:16: model.timeout: bad duration "banana": want e.g. "30s", "10m", "1d12h" or a number of seconds`},
		{"duration not a string", `{"approval": {"expiry": true}}`,
			nil, `$FILE:1:25: approval.expiry: want a string like "30s" or a number of seconds`},
		// a bad value is blamed on its source
		{"addr from file", "{\n  \"addr\": \"notanaddr\"\n}", nil, `$FILE:2:11: addr "notanaddr": ` + portHint},
		{"addr from env over file", `{"addr": "127.0.0.1:9000"}`, map[string]string{"TENDRIL_ADDR": "notanaddr"},
			`addr (from TENDRIL_ADDR) "notanaddr": ` + portHint},
		{"runtime from file", `{"runtime": "lambda"}`, nil,
			`$FILE:1:13: runtime "lambda" is unknown: use "agentcore", or leave it unset for a self-hosted server`},
		// a key set twice is refused, naming both places
		{"duplicate", "{\n  \"model\": {\"id\": \"a/b\"},\n  \"model\": {\"maxTokens\": 5}\n}",
			nil, `$FILE:3:3: model: duplicate key (first at line 2, column 3)`},
		{"duplicate other case", "{\"model\": {},\n \"Model\": {}}", nil, `$FILE:2:2: model: duplicate key (first at line 1, column 2)`},
		{"duplicate nested", `{"model": {"id": "a/b", "id": "c/d"}}`, nil, `$FILE:1:25: model.id: duplicate key (first at line 1, column 12)`},
		{"duplicate map key", `{"session": {"channelOverrides": {"dm": {}, "dm": {}}}}`,
			nil, `$FILE:1:45: session.channelOverrides.dm: duplicate key (first at line 1, column 35)`},
		// what stays valid: keys in another case (as encoding/json), map
		// keys that differ in case, null for a default
		{"valid", `{"MODEL": {"ID": "openai/x", "timeout": null}, "session": {"channelOverrides": {"dm": {}, "DM": {}}}}`, nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("TENDRIL_HOME", t.TempDir())
			for _, k := range []string{"TENDRIL_ADDR", "TENDRIL_RUNTIME", "TENDRIL_AUTH_TOKEN", "MODEL_ID"} {
				t.Setenv(k, tc.env[k])
			}
			path := filepath.Join(t.TempDir(), "tendril.json")
			if err := os.WriteFile(path, []byte(tc.file), 0o600); err != nil {
				t.Fatal(err)
			}
			c, err := Load(path)
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				if c.Model.ID != "openai/x" || c.Model.Timeout != Default().Model.Timeout {
					t.Fatalf("model %+v", c.Model)
				}
				return
			}
			want := strings.ReplaceAll(tc.want, "$FILE", path)
			if err == nil || err.Error() != want {
				t.Fatalf("err\n  %v\nwant\n  %s", err, want)
			}
		})
	}
}

// FuzzParseFile: parseFile never panics, and what it accepts Load's
// strict decode accepts too, so Load never falls back to an error
// without a line and column.
func FuzzParseFile(f *testing.F) {
	for _, s := range []string{
		`{}`, `{"model": {"timeout": "2m", "fallbacks": ["a/b"]}}`, `{"model": {"timeout": {"x": 1}}}`,
		`{"session": {"channelOverrides": {"dm": {"maxHistoryTokens": 5}}}}`, `{"mcpServers": {"x": {"args": [1]}}}`,
		`{"telegram": {"allowedChatIds": [1e3]}}`, "{/* c */ \"addr\": \"x\",}", `[]`, `{"state": {"baseline": {"a": null}}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		_, std, err := parseFile("tendril.json", bytes.Clone(b))
		if err != nil {
			if !strings.HasPrefix(err.Error(), "tendril.json:") {
				t.Fatalf("error without the file: %v", err)
			}
			return
		}
		c := Default()
		dec := json.NewDecoder(bytes.NewReader(std))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&c); err != nil {
			t.Fatalf("parseFile accepted %q, decode: %v", b, err)
		}
	})
}
