package skill_test

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tendrilai/tendril/internal/skill"
)

func TestParse(t *testing.T) {
	tests := []struct {
		name     string
		in       string
		wantName string
		wantDesc string
		wantBody string
		wantErr  string
	}{
		{
			name:     "minimal",
			in:       "---\nname: weather\ndescription: Check the forecast.\n---\n# Weather\n\nCall the weather tool.\n",
			wantName: "weather", wantDesc: "Check the forecast.", wantBody: "# Weather\n\nCall the weather tool.",
		},
		{
			name:     "crlf and bom",
			in:       "\xef\xbb\xbf---\r\nname: plant-notes\r\ndescription: Keep notes.\r\n---\r\nBody\r\n",
			wantName: "plant-notes", wantDesc: "Keep notes.", wantBody: "Body",
		},
		{
			name:     "no body",
			in:       "---\nname: a1\ndescription: d\n---",
			wantName: "a1", wantDesc: "d", wantBody: "",
		},
		{
			name:     "multiline description and extra fields",
			in:       "---\nname: reminders\ndescription: >\n  Set and cancel\n  reminders.\nlicense: MIT\nmetadata:\n  openclaw: {emoji: \"⏰\"}\n---\nx",
			wantName: "reminders", wantDesc: "Set and cancel reminders.", wantBody: "x",
		},
		{name: "no front matter", in: "# Weather\nname: weather", wantErr: "no YAML front matter"},
		{name: "unclosed", in: "---\nname: weather\ndescription: d\n", wantErr: "closing --- line is missing"},
		{name: "bad yaml", in: "---\nname: [weather\ndescription: d\n---\n", wantErr: "not valid YAML"},
		{name: "missing name", in: "---\ndescription: d\n---\n", wantErr: `missing required front-matter field "name"`},
		{name: "missing description", in: "---\nname: weather\n---\n", wantErr: `missing required front-matter field "description"`},
		{name: "empty description", in: "---\nname: weather\ndescription: \"  \"\n---\n", wantErr: `"description" (empty)`},
		{name: "name not string", in: "---\nname: 12\ndescription: d\n---\n", wantErr: `must be a string`},
		{name: "uppercase name", in: "---\nname: Weather\ndescription: d\n---\n", wantErr: "invalid skill name"},
		{name: "double hyphen", in: "---\nname: plant--notes\ndescription: d\n---\n", wantErr: "invalid skill name"},
		{name: "path in name", in: "---\nname: ../etc\ndescription: d\n---\n", wantErr: "invalid skill name"},
		{name: "description too long", in: "---\nname: x\ndescription: " + strings.Repeat("a", 1025) + "\n---\n", wantErr: "over the 1024 limit"},
		{name: "front matter is a list", in: "---\n- a\n- b\n---\n", wantErr: "not valid YAML"},
		{name: "oversize", in: "---\nname: x\ndescription: d\n---\n" + strings.Repeat("a", skill.MaxFileBytes), wantErr: "byte limit"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, err := skill.Parse([]byte(tc.in))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want it to contain %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if s.Name != tc.wantName || strings.TrimSpace(s.Description) != tc.wantDesc || s.Instructions != tc.wantBody {
				t.Fatalf("got %+v", s)
			}
		})
	}
}

func writeSkill(t *testing.T, dir, folder, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Join(dir, folder), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, folder, skill.FileName), []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestLoad(t *testing.T) {
	home := t.TempDir()
	dir := filepath.Join(home, "skills")
	writeSkill(t, dir, "weather", "---\nname: weather\ndescription: Forecasts.\n---\nUse the weather tool.")
	writeSkill(t, dir, "reminders", "---\nname: reminders\ndescription: Reminders.\n---\nUse the reminders tool.")
	writeSkill(t, dir, "broken", "no front matter here")
	writeSkill(t, dir, "bad-yaml", "---\nname: [\n---\n")
	writeSkill(t, dir, "renamed", "---\nname: other\ndescription: d\n---\n")
	writeSkill(t, dir, "no-desc", "---\nname: no-desc\n---\n")
	writeSkill(t, dir, "unlisted", "---\nname: unlisted\ndescription: d\n---\n")
	manifest := filepath.Join(home, "skills.json")
	m := skill.Manifest{Skills: []string{"reminders", "broken", "weather", "bad-yaml", "renamed", "no-desc", "missing", "../../etc", "weather"}}
	data, _ := json.Marshal(m)
	if err := os.WriteFile(manifest, data, 0o644); err != nil {
		t.Fatal(err)
	}

	active, problems, err := skill.Load(dir, manifest)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range active {
		names = append(names, s.Name)
	}
	if got := strings.Join(names, ","); got != "reminders,weather" {
		t.Fatalf("active = %s, want reminders,weather (manifest order)", got)
	}
	wantProblems := map[string]string{
		"broken":    "no YAML front matter",
		"bad-yaml":  "not valid YAML",
		"renamed":   `differs from its folder "renamed"`,
		"no-desc":   `"description"`,
		"missing":   "does not exist",
		"../../etc": "invalid skill name",
		"weather":   "listed twice",
	}
	if len(problems) != len(wantProblems) {
		t.Fatalf("problems = %v, want %d", problems, len(wantProblems))
	}
	for _, p := range problems {
		want, ok := wantProblems[p.Skill]
		if !ok || !strings.Contains(p.Error(), want) {
			t.Errorf("problem %v: want it to contain %q", p, want)
		}
	}
	if errors.Is(problems[len(problems)-1].Err, skill.ErrNotFound) {
		t.Error("duplicate reported as not found")
	}
	// Problems are JSON-friendly for `tendril doctor --json`.
	js, err := json.Marshal(problems[0])
	if err != nil || !strings.Contains(string(js), `"error":`) {
		t.Fatalf("problem JSON = %s, %v", js, err)
	}

	all, allProblems, err := skill.LoadAll(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 3 || all[0].Name != "reminders" || all[2].Name != "weather" || len(allProblems) != 4 {
		t.Fatalf("LoadAll = %d skills %v, problems %v", len(all), all, allProblems)
	}
}

func TestLoadManifestProblems(t *testing.T) {
	dir := t.TempDir()
	// No manifest: nothing active, one problem, no error.
	active, problems, err := skill.Load(dir, filepath.Join(dir, "skills.json"))
	if err != nil || len(active) != 0 || len(problems) != 1 || !errors.Is(problems[0].Err, skill.ErrNotFound) {
		t.Fatalf("missing manifest: %v %v %v", active, problems, err)
	}
	for _, bad := range []string{`{"skills": "weather"}`, `["weather"]`, `{"skills": [1]}`, `{"skils": []}`, `{`} {
		p := filepath.Join(dir, "bad.json")
		if err := os.WriteFile(p, []byte(bad), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, _, err := skill.Load(dir, p); err == nil || !strings.Contains(err.Error(), `want {"skills"`) {
			t.Errorf("manifest %s: err = %v", bad, err)
		}
	}
}

func TestPromptSection(t *testing.T) {
	if got := skill.PromptSection(nil); got != "" {
		t.Fatalf("empty = %q", got)
	}
	got := skill.PromptSection([]skill.Skill{
		{Name: "weather", Description: "Forecasts for garden plans.", Instructions: "Call `weather`."},
		{Name: "plant-notes", Description: "Notes per plant."},
	})
	want := "## Skills\n\nThese skills are enabled. When a request matches a skill's description, follow its instructions.\n\n" +
		"Enabled skills: weather, plant-notes\n\n### weather\n\nForecasts for garden plans.\n\nCall `weather`.\n\n" +
		"### plant-notes\n\nNotes per plant.\n"
	if got != want {
		t.Fatalf("PromptSection =\n%s\nwant\n%s", got, want)
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte("---\nname: weather\ndescription: d\n---\nbody"))
	f.Add([]byte("---\n---\n"))
	f.Add([]byte("---\nname: &a [*a]\n---\n"))
	f.Add([]byte("\xef\xbb\xbf---\r\nname: x\r\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := skill.Parse(data)
		if err != nil {
			return
		}
		if !skill.ValidName(s.Name) || s.Description == "" {
			t.Fatalf("Parse accepted %+v", s)
		}
	})
}

func TestProblemJSONWithoutErr(t *testing.T) {
	b, err := json.Marshal(skill.Problem{Skill: "x", Path: "p"})
	if err != nil || string(b) != `{"skill":"x","path":"p","error":""}` {
		t.Fatalf("%s %v", b, err)
	}
}
