package builtin_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tendrilai/tendril/internal/tool"
	"github.com/tendrilai/tendril/internal/tool/builtin"
)

// Response bodies in Open-Meteo's real shapes
// (https://open-meteo.com/en/docs/geocoding-api, https://open-meteo.com/en/docs).
const (
	geoBusan = `{"results":[{"id":1838524,"name":"Busan","latitude":35.10168,"longitude":129.03004,"elevation":13.0,
"feature_code":"PPLA","country_code":"KR","admin1_id":1838519,"timezone":"Asia/Seoul","population":3678555,
"country_id":1835841,"country":"South Korea","admin1":"Busan"}],"generationtime_ms":0.81}`
	geoNone      = `{"generationtime_ms":0.42}`
	forecastBody = `{"latitude":35.1,"longitude":129.03,"generationtime_ms":0.12,"utc_offset_seconds":32400,
"timezone":"Asia/Seoul","timezone_abbreviation":"GMT+9","elevation":13.0,
"current_units":{"time":"iso8601","interval":"seconds","temperature_2m":"°C","relative_humidity_2m":"%",
"apparent_temperature":"°C","precipitation":"mm","weather_code":"wmo code","wind_speed_10m":"km/h"},
"current":{"time":"2026-11-30T18:00","interval":900,"temperature_2m":9.4,"relative_humidity_2m":61,
"apparent_temperature":6.8,"precipitation":0.0,"weather_code":3,"wind_speed_10m":14.2},
"daily_units":{"time":"iso8601","weather_code":"wmo code","temperature_2m_max":"°C","temperature_2m_min":"°C",
"precipitation_sum":"mm","precipitation_probability_max":"%","wind_speed_10m_max":"km/h"},
"daily":{"time":["2026-11-30","2026-12-01"],"weather_code":[3,61],"temperature_2m_max":[11.2,8.0],
"temperature_2m_min":[4.1,-1.5],"precipitation_sum":[0.0,4.2],"precipitation_probability_max":[5,80],
"wind_speed_10m_max":[18.0,null]}}`
	forecastError = `{"error":true,"reason":"Cannot initialize WeatherVariable from invalid String value tempeture_2m for key current"}`
)

type fakeMeteo struct {
	mu       sync.Mutex
	requests []string
	geo      func(w http.ResponseWriter, r *http.Request)
	forecast func(w http.ResponseWriter, r *http.Request)
}

func (f *fakeMeteo) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	f.requests = append(f.requests, r.URL.Path+"?"+r.URL.RawQuery)
	f.mu.Unlock()
	switch r.URL.Path {
	case "/v1/search":
		f.geo(w, r)
	case "/v1/forecast":
		f.forecast(w, r)
	default:
		http.NotFound(w, r)
	}
}

func (f *fakeMeteo) seen() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.requests...)
}

func reply(status int, body string) func(http.ResponseWriter, *http.Request) {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json; charset=utf-8")
		w.WriteHeader(status)
		w.Write([]byte(body))
	}
}

func TestWeather(t *testing.T) {
	hang := func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() }
	tests := []struct {
		name         string
		args         string
		geo          func(http.ResponseWriter, *http.Request)
		forecast     func(http.ResponseWriter, *http.Request)
		want         []string
		wantErr      string
		wantRequests int
	}{
		{
			name: "by name", args: `{"location":"Busan","days":2}`,
			geo: reply(200, geoBusan), forecast: reply(200, forecastBody),
			want: []string{
				"Busan, South Korea (35.10, 129.03), timezone Asia/Seoul",
				"Now (2026-11-30T18:00): overcast, 9.4°C, feels like 6.8°C, humidity 61%, precipitation 0 mm, wind 14.2 km/h",
				"- 2026-11-30: overcast, 4.1 to 11.2°C, precipitation 0 mm (5% chance), wind up to 18 km/h",
				"- 2026-12-01: light rain, -1.5 to 8°C, precipitation 4.2 mm (80% chance), FROST RISK",
			},
			wantRequests: 2,
		},
		{
			name: "by coordinates skips geocoding", args: `{"latitude":35.1,"longitude":129.03}`,
			geo: reply(500, ""), forecast: reply(200, forecastBody),
			want: []string{"Location (35.10, 129.03)"}, wantRequests: 1,
		},
		{
			name: "unknown place", args: `{"location":"Xyzzyville"}`,
			geo: reply(200, geoNone), wantErr: `no place found for "Xyzzyville"`, wantRequests: 1,
		},
		{
			name: "forecast 400 carries reason", args: `{"location":"Busan"}`,
			geo: reply(200, geoBusan), forecast: reply(400, forecastError),
			wantErr: "open-meteo forecast: HTTP 400: Cannot initialize WeatherVariable", wantRequests: 2,
		},
		{
			name: "geocoding 503 without body", args: `{"location":"Busan"}`,
			geo: reply(503, "upstream down"), wantErr: "open-meteo geocoding: HTTP 503", wantRequests: 1,
		},
		{
			name: "malformed JSON", args: `{"location":"Busan"}`,
			geo: reply(200, geoBusan), forecast: reply(200, `{"daily": [`),
			wantErr: "open-meteo forecast: malformed response", wantRequests: 2,
		},
		{
			name: "timeout", args: `{"location":"Busan"}`,
			geo: hang, wantErr: "open-meteo geocoding: no answer within 100ms", wantRequests: 1,
		},
		{name: "no place", args: `{}`, wantErr: "give a location name"},
		{name: "half coordinates", args: `{"latitude":10}`, wantErr: "give both latitude and longitude"},
		{name: "latitude out of range", args: `{"latitude":91,"longitude":0}`, wantErr: "latitude must be in [-90, 90]"},
		{name: "days too many", args: `{"location":"Busan","days":17}`, wantErr: "days must be between 1 and 16"},
		{name: "unknown field", args: `{"city":"Busan"}`, wantErr: `unknown field "city"`},
		{name: "not an object", args: `"Busan"`, wantErr: "invalid arguments"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fake := &fakeMeteo{geo: tc.geo, forecast: tc.forecast}
			srv := httptest.NewServer(fake)
			defer srv.Close()
			wt := builtin.NewWeather(builtin.WeatherOptions{
				ForecastBaseURL: srv.URL + "/", GeocodingBaseURL: srv.URL, Timeout: 100 * time.Millisecond,
			})
			out, err := wt.Run(context.Background(), tool.Call{AgentID: "main", ActorID: "a", Args: json.RawMessage(tc.args)})
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
			} else {
				if err != nil {
					t.Fatal(err)
				}
				for _, w := range tc.want {
					if !strings.Contains(out, w) {
						t.Errorf("output lacks %q:\n%s", w, out)
					}
				}
			}
			if seen := fake.seen(); len(seen) != tc.wantRequests {
				t.Fatalf("requests = %v, want %d", seen, tc.wantRequests)
			}
		})
	}
}

// The requests carry the parameters Open-Meteo documents.
func TestWeatherRequestShape(t *testing.T) {
	fake := &fakeMeteo{geo: reply(200, geoBusan), forecast: reply(200, forecastBody)}
	srv := httptest.NewServer(fake)
	defer srv.Close()
	wt := builtin.NewWeather(builtin.WeatherOptions{ForecastBaseURL: srv.URL, GeocodingBaseURL: srv.URL})
	if _, err := wt.Run(context.Background(), tool.Call{Args: json.RawMessage(`{"location":"Leeds, England"}`)}); err != nil {
		t.Fatal(err)
	}
	seen := fake.seen()
	geo, fc := seen[0], seen[1]
	for _, w := range []string{"/v1/search?", "name=Leeds%2C+England", "count=1"} {
		if !strings.Contains(geo, w) {
			t.Errorf("geocoding request %s lacks %s", geo, w)
		}
	}
	for _, w := range []string{"/v1/forecast?", "latitude=35.1017", "longitude=129.0300", "timezone=auto", "forecast_days=3",
		"current=temperature_2m%2C", "daily=weather_code%2Ctemperature_2m_max"} {
		if !strings.Contains(fc, w) {
			t.Errorf("forecast request %s lacks %s", fc, w)
		}
	}
	if wt.Class() != tool.ClassRead || !json.Valid(wt.Schema()) {
		t.Fatal("weather must be read class with a valid schema")
	}
}
