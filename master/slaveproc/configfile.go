package slaveproc

import (
	"fmt"
	"os"
	"reflect"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/redcrawl/redcrawl/shared/config"
)

// configYAML renders cfg as a config file that config.Load reads back to
// the same values: keys are the mapstructure tags, durations are written
// with their unit.
func configYAML(cfg *config.Config) ([]byte, error) {
	m, ok := yamlValue(reflect.ValueOf(*cfg)).(map[string]any)
	if !ok {
		return nil, fmt.Errorf("slaveproc: config is not a struct")
	}
	return yaml.Marshal(m)
}

// WriteConfig writes cfg to a new file in dir (mode 0600: it may name
// password files) that config.Load reads back to the same values, and
// returns its path.
func WriteConfig(dir string, cfg *config.Config) (string, error) {
	b, err := configYAML(cfg)
	if err != nil {
		return "", err
	}
	f, err := os.CreateTemp(dir, "slave-config-*.yaml")
	if err != nil {
		return "", fmt.Errorf("slaveproc: slave config: %w", err)
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return "", fmt.Errorf("slaveproc: slave config: %w", err)
	}
	return f.Name(), f.Close()
}

var durationType = reflect.TypeFor[time.Duration]()

func yamlValue(v reflect.Value) any {
	if v.Type() == durationType {
		return time.Duration(v.Int()).String()
	}
	switch v.Kind() {
	case reflect.Struct:
		out := map[string]any{}
		for i := range v.NumField() {
			f := v.Type().Field(i)
			if !f.IsExported() {
				continue
			}
			name, _, _ := strings.Cut(f.Tag.Get("mapstructure"), ",")
			if name == "" {
				name = strings.ToLower(f.Name)
			}
			out[name] = yamlValue(v.Field(i))
		}
		return out
	case reflect.Slice:
		out := make([]any, v.Len())
		for i := range v.Len() {
			out[i] = yamlValue(v.Index(i))
		}
		return out
	case reflect.Map:
		out := map[string]any{}
		for _, k := range v.MapKeys() {
			out[fmt.Sprint(k.Interface())] = yamlValue(v.MapIndex(k))
		}
		return out
	default:
		return v.Interface()
	}
}
