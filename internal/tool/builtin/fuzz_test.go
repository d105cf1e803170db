package builtin

import (
	"encoding/json"
	"testing"
)

// Whatever Open-Meteo (or something pretending to be it) answers, the
// weather tool formats it without panicking.
func FuzzFormatForecast(f *testing.F) {
	f.Add([]byte(`{"latitude":1,"longitude":2,"current":{"weather_code":3,"temperature_2m":"x"},"daily":{"time":["d",1,null],"temperature_2m_min":[-1],"temperature_2m_max":[]}}`))
	f.Add([]byte(`{"daily":{"time":[]},"current_units":{"temperature_2m":"°F"}}`))
	f.Add([]byte(`{"current":{"weather_code":1e300}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var fc forecast
		if json.Unmarshal(data, &fc) != nil {
			return
		}
		_ = formatForecast(place{Name: "x"}, fc)
	})
}

// Any JSON filter from the model becomes a filter or a clear error.
func FuzzToFilter(f *testing.F) {
	f.Add(`{"key":"createdAt","op":"AFTER","value":"2026-01-01"}`)
	f.Add(`{"key":"plants","op":"contains","value":["a",1]}`)
	f.Add(`{"key":"n","op":"LESS_THAN","value":1e999}`)
	f.Fuzz(func(t *testing.T, s string) {
		var fa filterArg
		if json.Unmarshal([]byte(s), &fa) != nil {
			return
		}
		out, err := toFilter(fa)
		if err == nil && (out.Key == "" || out.Op == "") {
			t.Fatalf("accepted %+v from %s", out, s)
		}
	})
}
