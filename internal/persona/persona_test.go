package persona_test

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/tendrilai/tendril/internal/persona"
	"github.com/tendrilai/tendril/internal/skill"
	"github.com/tendrilai/tendril/internal/tool/builtin"
)

func TestDefault(t *testing.T) {
	p := persona.Default()
	if p.Name != "Sprout" || !strings.Contains(p.Text, "You are **Sprout**") || strings.Contains(p.Text, "anchors:") {
		t.Fatalf("default persona = %+v", p)
	}
	if len(p.Anchors) < 3 || !strings.HasPrefix(p.Anchors[0], "I am Sprout") {
		t.Fatalf("anchors = %q", p.Anchors)
	}
	if p.Source != "embedded:persona.md" {
		t.Fatalf("source = %q", p.Source)
	}
}

func TestParse(t *testing.T) {
	tests := []struct {
		name        string
		in          string
		wantName    string
		wantAnchors []string
		wantText    string
		wantErr     string
	}{
		{name: "no front matter, heading names it", in: "# Helpy\n\nYou help.", wantName: "Helpy", wantText: "# Helpy\n\nYou help."},
		{name: "no heading", in: "You help.", wantName: "Assistant", wantText: "You help."},
		{
			name:     "front matter",
			in:       "---\nname: Pace\nanchors:\n  - I am Pace.\n  - \"  \"\n  - Safety first.\n---\n\nCoach people.\n",
			wantName: "Pace", wantAnchors: []string{"I am Pace.", "Safety first."}, wantText: "Coach people.",
		},
		{name: "empty front matter", in: "---\n---\nHi", wantName: "Assistant", wantText: "Hi"},
		{name: "crlf", in: "---\r\nname: X\r\n---\r\nBody\r\n", wantName: "X", wantText: "Body"},
		{name: "unknown field", in: "---\nnmae: X\n---\nBody", wantErr: "field nmae not found"},
		{name: "anchors not a list", in: "---\nanchors: be nice\n---\nBody", wantErr: "want name (string) and anchors"},
		{name: "unclosed", in: "---\nname: X\nBody", wantErr: "no closing ---"},
		{name: "empty body", in: "---\nname: X\n---\n  \n", wantErr: "persona text is empty"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, err := persona.Parse([]byte(tc.in))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if p.Name != tc.wantName || p.Text != tc.wantText || strings.Join(p.Anchors, "|") != strings.Join(tc.wantAnchors, "|") {
				t.Fatalf("got %+v", p)
			}
		})
	}
}

func TestLoad(t *testing.T) {
	home := t.TempDir()
	// Missing file: the embedded default.
	p, err := persona.Load(home, "")
	if err != nil || p.Name != "Sprout" || p.Source != "embedded:persona.md" {
		t.Fatalf("missing: %+v %v", p, err)
	}
	// A file in home.
	if err := os.WriteFile(filepath.Join(home, "persona.md"), []byte("---\nname: Desk\nanchors: [I am Desk.]\n---\nHelp desk."), 0o644); err != nil {
		t.Fatal(err)
	}
	p, err = persona.Load(home, "persona.md")
	if err != nil || p.Name != "Desk" || p.Text != "Help desk." || len(p.Anchors) != 1 || p.Source != filepath.Join(home, "persona.md") {
		t.Fatalf("custom: %+v %v", p, err)
	}
	// An absolute path elsewhere.
	other := filepath.Join(t.TempDir(), "bot.md")
	if err := os.WriteFile(other, []byte("# Bot\nBeep."), 0o644); err != nil {
		t.Fatal(err)
	}
	if p, err = persona.Load(home, other); err != nil || p.Name != "Bot" {
		t.Fatalf("absolute: %+v %v", p, err)
	}
	// Broken and oversize files are errors naming the file.
	bad := filepath.Join(home, "bad.md")
	if err := os.WriteFile(bad, []byte("---\nanchors: {x: 1}\n---\nBody"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := persona.Load(home, "bad.md"); err == nil || !strings.Contains(err.Error(), bad) {
		t.Fatalf("bad: err = %v", err)
	}
	if err := os.WriteFile(bad, bytes.Repeat([]byte("a"), persona.MaxFileBytes+1), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := persona.Load(home, "bad.md"); err == nil || !strings.Contains(err.Error(), "byte limit") {
		t.Fatalf("oversize: err = %v", err)
	}
}

func TestInstall(t *testing.T) {
	home := filepath.Join(t.TempDir(), "home")
	written, err := persona.Install(home)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"persona.md", "skills.json", "skills/plant-notes/SKILL.md", "skills/reminders/SKILL.md", "skills/weather/SKILL.md"}
	sort.Strings(written)
	if len(written) != len(want) {
		t.Fatalf("written = %v, want %v", written, want)
	}
	for i, w := range want {
		if written[i] != filepath.Join(home, filepath.FromSlash(w)) {
			t.Fatalf("written[%d] = %s, want %s", i, written[i], w)
		}
	}
	// The installed home loads cleanly.
	p, err := persona.Load(home, "")
	if err != nil || p.Name != "Sprout" || p.Source != filepath.Join(home, "persona.md") {
		t.Fatalf("installed persona: %+v %v", p, err)
	}
	active, problems, err := skill.Load(filepath.Join(home, "skills"), filepath.Join(home, "skills.json"))
	if err != nil || len(problems) != 0 || len(active) != 3 {
		t.Fatalf("installed skills: %v %v %v", active, problems, err)
	}

	// A user edit survives a second Install, which writes nothing.
	mine := []byte("# Mine\nMy own persona.")
	if err := os.WriteFile(filepath.Join(home, "persona.md"), mine, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(home, "skills", "weather", "SKILL.md")); err != nil {
		t.Fatal(err)
	}
	written, err = persona.Install(home)
	if err != nil {
		t.Fatal(err)
	}
	if len(written) != 1 || !strings.HasSuffix(written[0], filepath.FromSlash("skills/weather/SKILL.md")) {
		t.Fatalf("second install wrote %v, want only the removed skill", written)
	}
	got, _ := os.ReadFile(filepath.Join(home, "persona.md"))
	if !bytes.Equal(got, mine) {
		t.Fatalf("persona.md overwritten: %q", got)
	}
	if entries, _ := filepath.Glob(filepath.Join(home, ".install-*")); len(entries) != 0 {
		t.Fatalf("temporary files left: %v", entries)
	}
}

// examples/sprout is the embedded default, byte for byte.
func TestSproutExampleMatchesDefaults(t *testing.T) {
	example := os.DirFS(filepath.Join("..", "..", "examples", "sprout"))
	n := 0
	err := fs.WalkDir(persona.Defaults(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		n++
		want, _ := fs.ReadFile(persona.Defaults(), p)
		got, err := fs.ReadFile(example, p)
		if err != nil {
			return err
		}
		if !bytes.Equal(got, want) {
			t.Errorf("examples/sprout/%s differs from internal/persona/defaults/%s", p, p)
		}
		return nil
	})
	if err != nil || n != 5 {
		t.Fatalf("walk: %v (%d files)", err, n)
	}
}

// A second persona runs with no code change: it installs, loads and its
// skills are all valid.
func TestFitnessCoachExample(t *testing.T) {
	home := t.TempDir()
	if _, err := persona.InstallFS(home, os.DirFS(filepath.Join("..", "..", "examples", "fitness-coach"))); err != nil {
		t.Fatal(err)
	}
	p, err := persona.Load(home, "persona.md")
	if err != nil || p.Name != "Pace" || len(p.Anchors) < 3 || strings.Contains(p.Text, "Sprout") {
		t.Fatalf("persona: %+v %v", p, err)
	}
	active, problems, err := skill.Load(filepath.Join(home, "skills"), filepath.Join(home, "skills.json"))
	if err != nil || len(problems) != 0 {
		t.Fatalf("skills: %v %v", problems, err)
	}
	var names []string
	for _, s := range active {
		names = append(names, s.Name)
	}
	if got := strings.Join(names, ","); got != "workout-log,weather,reminders" {
		t.Fatalf("active = %s", got)
	}
	if sec := skill.PromptSection(active); !strings.Contains(sec, "### workout-log") || strings.Contains(sec, "plant-notes") {
		t.Fatalf("prompt section:\n%s", sec)
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte("---\nname: Sprout\nanchors: [a, b]\n---\nBody"))
	f.Add([]byte("# Title\nbody"))
	f.Add([]byte("---\n---\n"))
	f.Add([]byte("---\nanchors: &a [*a]\n---\nx"))
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := persona.Parse(data)
		if err != nil {
			return
		}
		if p.Text == "" || p.Name == "" {
			t.Fatalf("accepted %+v", p)
		}
		for _, a := range p.Anchors {
			if strings.TrimSpace(a) == "" {
				t.Fatalf("empty anchor kept: %q", p.Anchors)
			}
		}
	})
}

// The shipped skills only tell the model to call tools Tendril has.
func TestSkillsNameRealTools(t *testing.T) {
	known := map[string]bool{
		builtin.NameWeather: true, builtin.NameNotes: true, builtin.NameNotesSearch: true,
		builtin.NameMemorySearch: true, builtin.NameMemoryWrite: true, "reminders": true,
	}
	callRe := regexp.MustCompile("(?:[Cc]all|[Uu]se)(?: the)? `([a-z_]+)`")
	for _, root := range []fs.FS{persona.Defaults(), os.DirFS(filepath.Join("..", "..", "examples", "fitness-coach"))} {
		matches, _ := fs.Glob(root, "skills/*/SKILL.md")
		if len(matches) != 3 {
			t.Fatalf("skills = %v", matches)
		}
		for _, m := range matches {
			data, _ := fs.ReadFile(root, m)
			found := callRe.FindAllStringSubmatch(string(data), -1)
			if len(found) == 0 {
				t.Errorf("%s names no tool", m)
			}
			for _, f := range found {
				if !known[f[1]] {
					t.Errorf("%s tells the model to call unknown tool %q", m, f[1])
				}
			}
		}
	}
}
