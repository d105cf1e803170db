package builtin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/tendrilai/tendril/internal/tool"
)

// Open-Meteo defaults (https://open-meteo.com/en/docs,
// https://open-meteo.com/en/docs/geocoding-api). No API key is needed.
const (
	DefaultForecastBaseURL  = "https://api.open-meteo.com"
	DefaultGeocodingBaseURL = "https://geocoding-api.open-meteo.com"
	DefaultWeatherTimeout   = 10 * time.Second
	maxWeatherBody          = 1 << 20
)

// WeatherOptions configures the weather tool. Zero values take the
// defaults above.
type WeatherOptions struct {
	ForecastBaseURL  string        // GET {ForecastBaseURL}/v1/forecast
	GeocodingBaseURL string        // GET {GeocodingBaseURL}/v1/search
	HTTPClient       *http.Client  // default: a client with Timeout
	Timeout          time.Duration // per HTTP request; default 10 s
}

type weatherTool struct {
	staticTool
	opts WeatherOptions
}

// NewWeather returns the read-class weather tool. It resolves a place name
// with the Open-Meteo geocoding API (name, count=1) and then fetches the
// current conditions and a daily forecast (1–16 days, default 3) with
// timezone=auto. Failures (unknown place, HTTP errors with Open-Meteo's
// {"error":true,"reason":…} body, timeouts) are returned as errors with
// the reason.
func NewWeather(o WeatherOptions) tool.Tool {
	if o.ForecastBaseURL == "" {
		o.ForecastBaseURL = DefaultForecastBaseURL
	}
	if o.GeocodingBaseURL == "" {
		o.GeocodingBaseURL = DefaultGeocodingBaseURL
	}
	if o.Timeout <= 0 {
		o.Timeout = DefaultWeatherTimeout
	}
	if o.HTTPClient == nil {
		o.HTTPClient = &http.Client{Timeout: o.Timeout}
	}
	o.ForecastBaseURL = strings.TrimRight(o.ForecastBaseURL, "/")
	o.GeocodingBaseURL = strings.TrimRight(o.GeocodingBaseURL, "/")
	return &weatherTool{opts: o, staticTool: staticTool{
		name:  NameWeather,
		class: tool.ClassRead,
		desc: "Current weather and a daily forecast (temperature, precipitation, wind, frost risk) for a place, " +
			"from Open-Meteo. Give a place name in `location`, or `latitude` and `longitude`.",
		schema: json.RawMessage(`{
  "type": "object",
  "properties": {
    "location": {"type": "string", "description": "Place name, e.g. \"Busan\" or \"Leeds, England\"", "maxLength": 200},
    "latitude": {"type": "number", "minimum": -90, "maximum": 90},
    "longitude": {"type": "number", "minimum": -180, "maximum": 180},
    "days": {"type": "integer", "minimum": 1, "maximum": 16, "description": "Forecast days, default 3"}
  },
  "additionalProperties": false
}`),
	}}
}

type weatherArgs struct {
	Location  string   `json:"location"`
	Latitude  *float64 `json:"latitude"`
	Longitude *float64 `json:"longitude"`
	Days      int      `json:"days"`
}

// place is one Open-Meteo geocoding result.
type place struct {
	Name        string  `json:"name"`
	Latitude    float64 `json:"latitude"`
	Longitude   float64 `json:"longitude"`
	Country     string  `json:"country"`
	CountryCode string  `json:"country_code"`
	Admin1      string  `json:"admin1"`
	Timezone    string  `json:"timezone"`
}

// forecast is the part of the Open-Meteo forecast response we read.
type forecast struct {
	Latitude     float64           `json:"latitude"`
	Longitude    float64           `json:"longitude"`
	Timezone     string            `json:"timezone"`
	CurrentUnits map[string]string `json:"current_units"`
	Current      map[string]any    `json:"current"`
	DailyUnits   map[string]string `json:"daily_units"`
	Daily        map[string][]any  `json:"daily"`
}

const (
	currentVars = "temperature_2m,relative_humidity_2m,apparent_temperature,precipitation,weather_code,wind_speed_10m"
	dailyVars   = "weather_code,temperature_2m_max,temperature_2m_min,precipitation_sum,precipitation_probability_max,wind_speed_10m_max"
)

func (w *weatherTool) Run(ctx context.Context, call tool.Call) (string, error) {
	var a weatherArgs
	if err := decodeArgs(call.Args, &a); err != nil {
		return "", err
	}
	if a.Days == 0 {
		a.Days = 3
	}
	if a.Days < 1 || a.Days > 16 {
		return "", fmt.Errorf("days must be between 1 and 16, got %d", a.Days)
	}
	var p place
	switch {
	case a.Latitude != nil && a.Longitude != nil:
		lat, lon := *a.Latitude, *a.Longitude
		if math.IsNaN(lat) || lat < -90 || lat > 90 || math.IsNaN(lon) || lon < -180 || lon > 180 {
			return "", fmt.Errorf("latitude must be in [-90, 90] and longitude in [-180, 180], got %g, %g", lat, lon)
		}
		p = place{Name: strings.TrimSpace(a.Location), Latitude: lat, Longitude: lon}
	case a.Latitude != nil || a.Longitude != nil:
		return "", errors.New("give both latitude and longitude, or a location name")
	case strings.TrimSpace(a.Location) != "":
		loc := strings.TrimSpace(a.Location)
		if len(loc) > 200 {
			return "", errors.New("location is longer than 200 characters")
		}
		var err error
		if p, err = w.geocode(ctx, loc); err != nil {
			return "", err
		}
	default:
		return "", errors.New("give a location name, or latitude and longitude")
	}
	f, err := w.forecast(ctx, p.Latitude, p.Longitude, a.Days)
	if err != nil {
		return "", err
	}
	return formatForecast(p, f), nil
}

func (w *weatherTool) geocode(ctx context.Context, name string) (place, error) {
	q := url.Values{"name": {name}, "count": {"1"}, "format": {"json"}}
	var res struct {
		Results []place `json:"results"`
	}
	if err := w.get(ctx, "geocoding", w.opts.GeocodingBaseURL+"/v1/search?"+q.Encode(), &res); err != nil {
		return place{}, err
	}
	if len(res.Results) == 0 {
		return place{}, fmt.Errorf("no place found for %q; try a nearby town or add the country", name)
	}
	return res.Results[0], nil
}

func (w *weatherTool) forecast(ctx context.Context, lat, lon float64, days int) (forecast, error) {
	q := url.Values{
		"latitude":      {strconv.FormatFloat(lat, 'f', 4, 64)},
		"longitude":     {strconv.FormatFloat(lon, 'f', 4, 64)},
		"current":       {currentVars},
		"daily":         {dailyVars},
		"timezone":      {"auto"},
		"forecast_days": {strconv.Itoa(days)},
	}
	var f forecast
	if err := w.get(ctx, "forecast", w.opts.ForecastBaseURL+"/v1/forecast?"+q.Encode(), &f); err != nil {
		return forecast{}, err
	}
	return f, nil
}

// get fetches u and decodes JSON into v. Non-2xx answers are turned into
// errors carrying Open-Meteo's "reason".
func (w *weatherTool) get(ctx context.Context, api, u string, v any) error {
	ctx, cancel := context.WithTimeout(ctx, w.opts.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return fmt.Errorf("open-meteo %s: %w", api, err)
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", "tendril")
	resp, err := w.opts.HTTPClient.Do(req)
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			return fmt.Errorf("open-meteo %s: no answer within %s", api, w.opts.Timeout)
		}
		return fmt.Errorf("open-meteo %s: %w", api, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxWeatherBody+1))
	if err != nil {
		return fmt.Errorf("open-meteo %s: read body: %w", api, err)
	}
	if len(body) > maxWeatherBody {
		return fmt.Errorf("open-meteo %s: response over %d bytes", api, maxWeatherBody)
	}
	if resp.StatusCode/100 != 2 {
		var e struct {
			Reason string `json:"reason"`
		}
		if json.Unmarshal(body, &e) == nil && e.Reason != "" {
			return fmt.Errorf("open-meteo %s: HTTP %d: %s", api, resp.StatusCode, clip(e.Reason, 300))
		}
		return fmt.Errorf("open-meteo %s: HTTP %d", api, resp.StatusCode)
	}
	if err := json.Unmarshal(body, v); err != nil {
		return fmt.Errorf("open-meteo %s: malformed response: %w", api, err)
	}
	return nil
}

func formatForecast(p place, f forecast) string {
	var b strings.Builder
	name := p.Name
	if name == "" {
		name = "Location"
	}
	where := []string{name}
	if p.Admin1 != "" && p.Admin1 != p.Name {
		where = append(where, p.Admin1)
	}
	if p.Country != "" {
		where = append(where, p.Country)
	}
	fmt.Fprintf(&b, "%s (%.2f, %.2f)", strings.Join(where, ", "), f.Latitude, f.Longitude)
	if f.Timezone != "" {
		fmt.Fprintf(&b, ", timezone %s", f.Timezone)
	}
	b.WriteString("\n")

	if len(f.Current) > 0 {
		u := f.CurrentUnits
		b.WriteString("Now")
		if t, ok := f.Current["time"].(string); ok {
			fmt.Fprintf(&b, " (%s)", t)
		}
		b.WriteString(": ")
		var parts []string
		if code, ok := num(f.Current["weather_code"]); ok {
			parts = append(parts, wmoText(int(code)))
		}
		if v, ok := num(f.Current["temperature_2m"]); ok {
			parts = append(parts, fmt.Sprintf("%g%s", v, unit(u, "temperature_2m", "°C")))
		}
		if v, ok := num(f.Current["apparent_temperature"]); ok {
			parts = append(parts, fmt.Sprintf("feels like %g%s", v, unit(u, "apparent_temperature", "°C")))
		}
		if v, ok := num(f.Current["relative_humidity_2m"]); ok {
			parts = append(parts, fmt.Sprintf("humidity %g%s", v, unit(u, "relative_humidity_2m", "%")))
		}
		if v, ok := num(f.Current["precipitation"]); ok {
			parts = append(parts, fmt.Sprintf("precipitation %g %s", v, unit(u, "precipitation", "mm")))
		}
		if v, ok := num(f.Current["wind_speed_10m"]); ok {
			parts = append(parts, fmt.Sprintf("wind %g %s", v, unit(u, "wind_speed_10m", "km/h")))
		}
		b.WriteString(strings.Join(parts, ", "))
		b.WriteString("\n")
	}

	days := f.Daily["time"]
	if len(days) > 0 {
		b.WriteString("Daily forecast:\n")
		u := f.DailyUnits
		at := func(key string, i int) (float64, bool) {
			col := f.Daily[key]
			if i >= len(col) {
				return 0, false
			}
			return num(col[i])
		}
		for i, d := range days {
			day, _ := d.(string)
			var parts []string
			if code, ok := at("weather_code", i); ok {
				parts = append(parts, wmoText(int(code)))
			}
			lo, okLo := at("temperature_2m_min", i)
			hi, okHi := at("temperature_2m_max", i)
			if okLo && okHi {
				parts = append(parts, fmt.Sprintf("%g to %g%s", lo, hi, unit(u, "temperature_2m_max", "°C")))
			}
			if v, ok := at("precipitation_sum", i); ok {
				s := fmt.Sprintf("precipitation %g %s", v, unit(u, "precipitation_sum", "mm"))
				if pr, ok := at("precipitation_probability_max", i); ok {
					s += fmt.Sprintf(" (%g%% chance)", pr)
				}
				parts = append(parts, s)
			}
			if v, ok := at("wind_speed_10m_max", i); ok {
				parts = append(parts, fmt.Sprintf("wind up to %g %s", v, unit(u, "wind_speed_10m_max", "km/h")))
			}
			if okLo && lo <= 2 && unit(u, "temperature_2m_min", "°C") == "°C" {
				parts = append(parts, "FROST RISK")
			}
			fmt.Fprintf(&b, "- %s: %s\n", day, strings.Join(parts, ", "))
		}
	}
	return strings.TrimRight(b.String(), "\n")
}

func num(v any) (float64, bool) {
	f, ok := v.(float64)
	return f, ok
}

func unit(units map[string]string, key, def string) string {
	if u, ok := units[key]; ok && u != "" {
		return u
	}
	return def
}

// wmoText describes a WMO weather interpretation code as used by Open-Meteo
// (https://open-meteo.com/en/docs, "WMO Weather interpretation codes").
func wmoText(code int) string {
	switch code {
	case 0:
		return "clear sky"
	case 1:
		return "mainly clear"
	case 2:
		return "partly cloudy"
	case 3:
		return "overcast"
	case 45, 48:
		return "fog"
	case 51, 53, 55:
		return "drizzle"
	case 56, 57:
		return "freezing drizzle"
	case 61:
		return "light rain"
	case 63:
		return "rain"
	case 65:
		return "heavy rain"
	case 66, 67:
		return "freezing rain"
	case 71, 73, 75:
		return "snow"
	case 77:
		return "snow grains"
	case 80, 81, 82:
		return "rain showers"
	case 85, 86:
		return "snow showers"
	case 95:
		return "thunderstorm"
	case 96, 99:
		return "thunderstorm with hail"
	}
	return fmt.Sprintf("weather code %d", code)
}
