package memory

import (
	"errors"
	"strings"
	"testing"
)

func TestNamespace(t *testing.T) {
	cases := []struct {
		tmpl string
		v    NamespaceVars
		want string
		err  bool
	}{
		{DefaultLongTermTemplate, NamespaceVars{AgentID: "main", ActorID: "telegram:1"}, "/main/telegram:1/long_term/", false},
		{DefaultEpisodicTemplate, NamespaceVars{AgentID: "main", ActorID: "u", SessionID: "s1"}, "/main/u/episodic/s1/", false},
		{"/{agentId}/{actorId}/{strategyId}", NamespaceVars{AgentID: "a", ActorID: "a/b", StrategyID: "x"}, "/a/a%2Fb/x/", false},
		{"/{agentId}/{actorId}/", NamespaceVars{AgentID: "a", ActorID: ".."}, "/a/%2E%2E/", false},
		{DefaultEpisodicTemplate, NamespaceVars{AgentID: "main", ActorID: "u"}, "", true},
		{"/{nope}/", NamespaceVars{}, "", true},
	}
	for _, c := range cases {
		got, err := Namespace(c.tmpl, c.v)
		if (err != nil) != c.err || got != c.want {
			t.Errorf("Namespace(%q, %+v) = %q, %v", c.tmpl, c.v, got, err)
		}
	}
	for _, c := range []struct {
		ns, path string
		want     bool
	}{
		{"/main/12/long_term/", "/main/12/", true},
		{"/main/123/long_term/", "/main/12/", false},
		{"/main/12/", "/main/12/long_term/", false},
		{"/main/12/long_term/", "/", true},
		{"//main//12/", "/main/12", true},
	} {
		if got := NamespaceUnder(c.ns, c.path); got != c.want {
			t.Errorf("NamespaceUnder(%q, %q) = %v", c.ns, c.path, got)
		}
	}
}

func TestParseAndValidateFilters(t *testing.T) {
	f, err := ParseFilter("createdAt:after:2026-01-02")
	if err != nil || f.Op != OpAfter || f.Value != "2026-01-02" {
		t.Fatalf("%+v %v", f, err)
	}
	if _, err := ParseFilter("nokey"); !errors.Is(err, ErrInvalidFilter) {
		t.Fatal("bad filter accepted")
	}
	keys := append(DefaultIndexedKeys(), IndexedKey{Name: "height", Type: KeyNumber})
	vf, err := ValidateFilters([]Filter{{Key: "height", Op: OpGreater, Value: "1.5"}}, keys)
	if err != nil || vf[0].Value != 1.5 {
		t.Fatalf("%+v %v", vf, err)
	}
	rec := Record{Metadata: map[string]any{"height": 2.0}}
	for op, want := range map[string]bool{OpGreater: true, OpGreaterEq: true, OpLess: false, OpLessEq: false, OpEquals: false} {
		vf, err := ValidateFilters([]Filter{{Key: "height", Op: op, Value: 1.5}}, keys)
		if err != nil || MatchFilters(rec, vf) != want {
			t.Errorf("NUMBER %s: %v %v", op, MatchFilters(rec, vf), err)
		}
	}
	if _, err := ValidateFilters([]Filter{{Key: "height", Op: OpContains, Value: "1"}}, keys); !errors.Is(err, ErrInvalidFilter) {
		t.Error("CONTAINS on NUMBER accepted")
	}
	if err := ValidateIndexedKeys(make([]IndexedKey, 11)); !errors.Is(err, ErrInvalidFilter) {
		t.Error("11 keys accepted")
	}
}

func TestAssembleAndRender(t *testing.T) {
	hits := []Hit{
		{Record: Record{ID: "i1", Strategy: StrategySemantic, Content: "uses chemical fertiliser"}},
		{Record: Record{ID: "e1", Strategy: StrategyUserPreference, Content: "I only use organic fertiliser"}},
		{Record: Record{ID: "i2", Strategy: StrategyEpisodic, Content: "(2026-01-01) user: my fig tree has aphids on the new leaves"}},
		{Record: Record{ID: "p1", Strategy: StrategyProcedural, Content: "keep answers short"}},
		{Record: Record{ID: "i3", Strategy: StrategySemantic, Content: "likes roses", Metadata: map[string]any{"topic": "answer-length"}}},
	}
	got := Assemble(hits, 50)
	var ids []string
	for _, h := range got {
		ids = append(ids, h.Record.ID)
	}
	if strings.Join(ids, ",") != "e1,p1,i2,i3" {
		t.Fatalf("assembled %v", ids)
	}
	if n := len(Assemble(hits, 2)); n != 2 {
		t.Fatalf("cap: %d", n)
	}
	block := RenderBlock(got)
	want := "What you remember about this user:\n- [Explicit] I only use organic fertiliser\n- [Explicit] keep answers short\n"
	if !strings.HasPrefix(block, want) || RenderBlock(nil) != "" {
		t.Fatalf("block:\n%s", block)
	}
	if ContentHash("I only use ORGANIC fertiliser!") != ContentHash("i only use organic   fertiliser") {
		t.Fatal("ContentHash not normalised")
	}
}
