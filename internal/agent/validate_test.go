package agent

import (
	"strings"
	"testing"
)

// IDs are shown and compared as text: no control or invalid characters, no
// invisible characters that make one ID display as another (a
// right-to-left override) or as nothing (a zero-width space), no blank at
// either end, and at least one visible character. Each refusal says which.
func TestValidateID(t *testing.T) {
	for id, want := range map[string]string{
		"api:alice":       "",
		"telegram:123":    "",
		"שלום":            "", // right-to-left letters are text
		"web:ana 🌱":       "",
		"👨\u200d👩\u200d👧": "", // a family emoji: zero-width joiners
		"می\u200cخواهم":   "", // Persian: a zero-width non-joiner
		"🏴\U000e0067\U000e0062\U000e0073\U000e0063\U000e0074\U000e007f": "", // a flag: tag characters
		"a\u00adb":       "U+00AD",
		"a\u061cb":       "U+061C",
		"":               "is required",
		"   ":            "is required",
		"a\x00b":         "control or invalid",
		"a\xffb":         "control or invalid",
		"cli:\u202eevil": "U+202E",
		"a\u200bb":       "U+200B",
		"a\u2066b":       "U+2066",
		"a\ufeffb":       "U+FEFF",
		"line\u2028":     "U+2028",
		"\u200e":         "U+200E",
		// Letters and marks that render blank.
		"a\u3164b":               "U+3164",
		"\u3164":                 "U+3164", // an ID of nothing else
		"a\u115fb":               "U+115F",
		"\u1160":                 "U+1160",
		"a\uffa0b":               "U+FFA0",
		"\uffa0":                 "U+FFA0",
		"a\u034fb":               "U+034F",
		"a\u180eb":               "U+180E",
		"\u2800":                 "U+2800",
		"a\u2800b":               "U+2800",
		"a\u17b4b":               "U+17B4",
		"\u17b5":                 "U+17B5",
		"\u061c":                 "U+061C",
		"telegram:한글ID":          "",
		"한국어":                    "",
		strings.Repeat("x", 257): "longer than 256",
		// Blanks around an ID make it list beside the same ID without them.
		"s1 ":      "begins or ends with a blank",
		" s1":      "begins or ends with a blank",
		"api:me\t": "control or invalid",
		"a b":      "",
	} {
		err := ValidateID(id)
		switch {
		case want == "" && err != nil:
			t.Errorf("ValidateID(%q) = %v, want nil", id, err)
		case want != "" && (err == nil || !strings.Contains(err.Error(), want)):
			t.Errorf("ValidateID(%q) = %v, want an error saying %q", id, err, want)
		}
	}
	if err := ValidateActorID("api:a" + SessionSep + "b"); err == nil {
		t.Error("an actor ID holding the session separator was accepted")
	}
}
