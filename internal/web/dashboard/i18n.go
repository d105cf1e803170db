package dashboard

import (
	"net/http"

	"golang.org/x/text/language"
)

// Languages the dashboard speaks, English first (the fallback).
var supported = []language.Tag{language.English, language.Korean}

var matcher = language.NewMatcher(supported)

// lang picks "en" or "ko" from Accept-Language (an explicit ?lang= wins,
// for links and screenshots).
func lang(r *http.Request) string {
	if l := r.URL.Query().Get("lang"); l == "en" || l == "ko" {
		return l
	}
	tags, _, err := language.ParseAcceptLanguage(r.Header.Get("Accept-Language"))
	if err != nil || len(tags) == 0 {
		return "en"
	}
	_, i, conf := matcher.Match(tags...)
	if conf == language.No {
		return "en"
	}
	if supported[i] == language.Korean {
		return "ko"
	}
	return "en"
}

// t translates an English UI string; strings without a translation stay
// English.
func t(lang, s string) string {
	if lang == "ko" {
		if k, ok := ko[s]; ok {
			return k
		}
	}
	return s
}

// ko holds the Korean UI strings, keyed by the English ones.
var ko = map[string]string{
	// Navigation and layout
	"Tendril dashboard": "Tendril 대시보드",
	"No model is configured: set MODEL_ID (for example ollama/llama3.2) and restart; until then every message is refused.": "모델이 설정되지 않았습니다: MODEL_ID(예: ollama/llama3.2)를 설정하고 다시 시작하세요. 그 전까지는 모든 메시지가 거절됩니다.",
	"Chat":            "채팅",
	"Sessions":        "세션",
	"Session":         "세션",
	"Memory":          "메모리",
	"Approvals":       "승인",
	"State":           "상태",
	"Schedules":       "일정",
	"Settings":        "설정",
	"Sign in":         "로그인",
	"Sign out":        "로그아웃",
	"Error":           "오류",
	"Skip to content": "본문으로 건너뛰기",
	"Done.":           "완료했습니다.",
	"No such page.":   "그런 페이지가 없습니다.",
	"Back":            "뒤로",
	"Actor":           "액터",
	"Show":            "보기",
	"none":            "없음",

	// Auth
	"Token": "토큰",
	"Sign in first: the dashboard needs the auth token.":                                          "먼저 로그인하세요. 대시보드에는 인증 토큰이 필요합니다.",
	"The form expired or came from elsewhere (CSRF check failed); reload the page and try again.": "양식이 만료되었거나 다른 곳에서 왔습니다(CSRF 확인 실패). 페이지를 새로 고친 뒤 다시 시도하세요.",
	"Wrong token.": "토큰이 틀렸습니다.",
	"Too many wrong tokens: try again in %d s.":                                      "틀린 토큰이 너무 많습니다. %d초 뒤에 다시 시도하세요.",
	"This sign-in link is expired or was already used; run tendril dashboard again.": "이 로그인 링크는 만료되었거나 이미 사용되었습니다. tendril dashboard를 다시 실행하세요.",
	"Enter TENDRIL_AUTH_TOKEN, or open the link that tendril dashboard prints.":      "TENDRIL_AUTH_TOKEN을 입력하거나 tendril dashboard가 출력한 링크를 여세요.",
	"No token is configured: on loopback the dashboard needs no sign-in.":            "토큰이 설정되어 있지 않습니다. 루프백에서는 로그인이 필요 없습니다.",

	// Chat
	"Message":                     "메시지",
	"Send":                        "보내기",
	"Stop":                        "중지",
	"Stopped.":                    "중지했습니다.",
	"Thinking…":                   "생각하는 중…",
	"You":                         "나",
	"Assistant":                   "어시스턴트",
	"Tool":                        "도구",
	"Tool call":                   "도구 호출",
	"Result":                      "결과",
	"Arguments":                   "인수",
	"New session":                 "새 세션",
	"Session ID":                  "세션 ID",
	"No messages yet. Say hello.": "아직 메시지가 없습니다. 인사해 보세요.",
	"Waiting for approval":        "승인 대기 중",
	"Reply after approval":        "승인 후 답장",
	"The turn failed":             "턴이 실패했습니다",

	// Sessions
	"Key":              "키",
	"Channel":          "채널",
	"Nodes":            "노드",
	"Branches":         "분기",
	"Last text":        "마지막 텍스트",
	"No sessions yet.": "아직 세션이 없습니다.",
	"Branch from here": "여기서 분기",
	"Switch":           "전환",
	"Active":           "활성",
	"active path":      "활성 경로",
	"Export":           "내보내기",
	"Leaves":           "리프",
	"Open in chat":     "채팅에서 열기",
	"The next message continues from this node.": "다음 메시지는 이 노드에서 이어집니다.",

	// Memory
	"Records":            "레코드",
	"Namespace":          "네임스페이스",
	"Strategy":           "전략",
	"Status":             "상태",
	"Importance":         "중요도",
	"Metadata":           "메타데이터",
	"Sources":            "출처",
	"Content":            "내용",
	"Search":             "검색",
	"Score":              "점수",
	"Explanation":        "설명",
	"Staging queue":      "스테이징 대기열",
	"Approve":            "승인",
	"Reject":             "거부",
	"Forget this actor":  "이 액터 잊기",
	"Nothing is staged.": "스테이징된 항목이 없습니다.",
	"No records.":        "레코드가 없습니다.",
	"No hits.":           "결과가 없습니다.",
	"Actors with memory": "메모리가 있는 액터",
	"This removes every record, event, session, job, pending approval and state of the actor, for good.": "이 액터의 모든 레코드, 이벤트, 세션, 작업, 대기 중인 승인과 상태를 영구히 삭제합니다.",
	"Forgotten": "잊었습니다",
	"Cancel":    "취소",

	// Approvals
	"Pending requests":     "대기 중인 요청",
	"Deny":                 "거부",
	"Who asked":            "요청자",
	"Expires":              "만료",
	"expires in":           "남은 시간",
	"Why it asks":          "확인이 필요한 이유",
	"No pending requests.": "대기 중인 요청이 없습니다.",
	"YOLO window":          "YOLO 창",
	"Open for":             "열기",
	"minutes":              "분",
	"Open":                 "열기",
	"Close":                "닫기",
	"open until":           "열림, 종료 시각",
	"closed":               "닫힘",
	"While open, ask rules are treated as always (never and exec tools are untouched; at most 30 minutes).": "열려 있는 동안 ask 규칙은 always로 취급됩니다(never 및 exec 도구는 그대로, 최대 30분).",
	"Ledger":                      "원장",
	"verified":                    "검증됨",
	"BROKEN":                      "손상됨",
	"entries":                     "항목",
	"Head hash":                   "헤드 해시",
	"Last good hash":              "마지막 정상 해시",
	"Ledger broken — gate closed": "원장 손상 — 게이트 닫힘",
	"Every tool call is refused and open requests are rejected. After investigating (tendril audit verify), reopen the gate with:": "모든 도구 호출이 거부되고 열린 요청은 반려됩니다. 조사한 뒤(tendril audit verify) 다음 명령으로 게이트를 다시 여세요:",
	"Recent decisions": "최근 결정",
	"Decided by":       "결정자",

	// State
	"Numbers":                      "숫자",
	"Figure":                       "그림",
	"Value":                        "값",
	"Baseline":                     "기준값",
	"Trend":                        "추세",
	"Breaker":                      "차단기",
	"Turn":                         "턴",
	"Cause":                        "원인",
	"Stimulus":                     "자극",
	"Intensity":                    "강도",
	"Delta":                        "변화량",
	"Note":                         "메모",
	"Event log":                    "이벤트 로그",
	"Transitions":                  "전환",
	"No state yet for this actor.": "이 액터에는 아직 상태가 없습니다.",
	"Actors with state":            "상태가 있는 액터",
	"Every part of the figure is computed from the state alone; the same state always draws the same figure.": "그림의 모든 부분은 상태만으로 계산되며, 같은 상태는 항상 같은 그림을 그립니다.",
	"This is a numeric model for state management and safety control, not a claim of feelings.":               "이것은 상태 관리와 안전 제어를 위한 수치 모델이며, 감정을 주장하는 것이 아닙니다.",
	"Turns":                        "턴 수",
	"trust":                        "신뢰",
	"curiosity":                    "호기심",
	"vigilance":                    "경계",
	"attachment":                   "애착",
	"stability":                    "안정",
	"satisfaction":                 "만족",
	"DRIFT detected":               "DRIFT 감지됨",
	"figure consistent with state": "그림이 상태와 일치함",

	// Schedules
	"Jobs":         "작업",
	"Name":         "이름",
	"Kind":         "종류",
	"Spec":         "스펙",
	"Task":         "할 일",
	"Next run":     "다음 실행",
	"Last run":     "마지막 실행",
	"Attempts":     "시도",
	"Last error":   "마지막 오류",
	"Run now":      "지금 실행",
	"Remove":       "삭제",
	"Add a job":    "작업 추가",
	"Add":          "추가",
	"Time zone":    "시간대",
	"No jobs.":     "작업이 없습니다.",
	"Pause":        "일시 중지",
	"Resume":       "재개",
	"active":       "활성",
	"paused":       "일시 중지됨",
	"failed":       "실패",
	"done":         "완료",
	"Run history":  "실행 기록",
	"Started":      "시작",
	"Finished":     "종료",
	"Outcome":      "결과",
	"ok":           "성공",
	"error":        "오류",
	"No runs yet.": "아직 실행 기록이 없습니다.",
	"at: an instant (2026-12-01T09:00:00Z, or in 2h); every: an interval (90m); cron: an expression (0 8 * * *).": "at: 시각(2026-12-01T09:00:00Z 또는 in 2h), every: 간격(90m), cron: 표현식(0 8 * * *).",

	// Settings
	"Effective configuration":        "유효한 설정",
	"Secrets are masked.":            "비밀 값은 가려져 있습니다.",
	"Checks":                         "점검",
	"Skills":                         "스킬",
	"MCP servers":                    "MCP 서버",
	"Tools":                          "도구",
	"Class":                          "분류",
	"Description":                    "설명",
	"Live log":                       "실시간 로그",
	"No skills are active.":          "활성화된 스킬이 없습니다.",
	"No MCP servers are configured.": "설정된 MCP 서버가 없습니다.",
	"The log tail is not connected in this process.": "이 프로세스에는 로그 테일이 연결되어 있지 않습니다.",
	"Check":    "점검",
	"Detail":   "세부 정보",
	"built-in": "내장",
}
