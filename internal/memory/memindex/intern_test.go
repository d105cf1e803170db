package memindex

import (
	"fmt"
	"testing"
)

func TestMetaInterner(t *testing.T) {
	var in MetaInterner
	a := in.Intern(map[string]any{"agentId": "main", "n": float64(1)})
	b := in.Intern(map[string]any{"n": float64(1), "agentId": "main"})
	if fmt.Sprintf("%p", a) != fmt.Sprintf("%p", b) {
		t.Fatal("equal maps not shared")
	}
	c := in.Intern(map[string]any{"agentId": "other"})
	if fmt.Sprintf("%p", a) == fmt.Sprintf("%p", c) || c["agentId"] != "other" {
		t.Fatalf("different map shared or changed: %v", c)
	}
	nested := map[string]any{"plants": []string{"fig"}}
	if got := in.Intern(nested); fmt.Sprintf("%p", got) != fmt.Sprintf("%p", nested) || Internable(nested) {
		t.Fatal("a map with a list value must be left alone")
	}
	if in.Intern(nil) != nil {
		t.Fatal("nil must stay nil")
	}
	for i := 0; i < 2*maxInternedMeta; i++ {
		in.Intern(map[string]any{"id": fmt.Sprint(i)})
	}
	if len(in.m) > maxInternedMeta {
		t.Fatalf("interner holds %d maps, bound %d", len(in.m), maxInternedMeta)
	}
}
