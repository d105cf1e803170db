package extract

import (
	"testing"
	"time"

	"github.com/tendrilai/tendril/internal/memory"
)

// The broad rules read classes of statements, and leave alone what only
// looks like one: one-off requests, passing states, hearsay, people in
// general, hypotheticals and courtesy.
func TestBroadRules(t *testing.T) {
	ref := time.Date(2026, 5, 8, 13, 56, 0, 0, time.UTC)
	for _, tc := range []struct {
		text string
		want memory.Strategy // "" = no record
	}{
		{"I'm severely lactose intolerant.", memory.StrategySemantic},
		{"I teach piano to kids on Saturdays.", memory.StrategySemantic},
		{"Just finished my first half marathon!", memory.StrategySemantic},
		{"Heading to Jeju for a week on Friday.", memory.StrategySemantic},
		{"I normally cycle to work.", memory.StrategyUserPreference},
		{"Whenever I send you code, review it for security first.", memory.StrategyProcedural},
		{"Answer in bullet points whenever you compare products.", memory.StrategyProcedural},
		{"If I moved to Busan, I'd buy a boat.", ""},
		{"Maybe I'll learn the cello.", ""},
		{"Most people are allergic to something.", ""},
		{"우리 딸은 다음 주에 초등학교에 입학해요.", memory.StrategySemantic},
		{"저 작년에 회사 옮겼어요.", memory.StrategySemantic},
		{"난 매운 거 진짜 싫어.", memory.StrategyUserPreference},
		{"주말마다 등산 가요.", memory.StrategyUserPreference},
		{"나한테는 항상 존댓말 써 줘.", memory.StrategyProcedural},
		{"나한테 맛집 하나 추천해 줘.", ""},
		{"이 사진 좀 설명해 줘.", ""},
		{"요즘 너무 바빠요.", ""},
		{"친구가 그러는데 내일 비 온대.", ""},
		{"만약 내가 부자라면 섬을 살 거야.", ""},
		{"감사합니다, 덕분에 잘 해결됐어요.", ""},
	} {
		cs := ExtractText("e", "user", tc.text, ref)
		var got memory.Strategy
		if len(cs) > 0 {
			got = cs[0].Strategy
		}
		if got != tc.want {
			t.Errorf("%q → %q, want %q (%+v)", tc.text, got, tc.want, cs)
		}
	}
}
