package config

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"regexp"
	"sort"
	"strings"
	"time"

	"sigs.k8s.io/yaml"
)

// PriorityClass configures one priority class (see core.PriorityClass).
type PriorityClass struct {
	Name        string `json:"name"`
	Value       int    `json:"value"`
	Preemptible bool   `json:"preemptible"`
	MayBorrow   bool   `json:"mayBorrow"`
	IdleOnly    bool   `json:"idleOnly,omitempty"`
}

// Scheduler tunes the scheduling policy (see sched.Options).
type Scheduler struct {
	// StarvationAfter: a workload waiting this long gets a node reserved;
	// "0" disables reservations.
	StarvationAfter Duration `json:"starvationAfter"`
	// FairShareReclaim lets teams below their fair share reclaim from
	// teams above theirs.
	FairShareReclaim bool `json:"fairShareReclaim"`
	// MinRuntime protects a workload from fair-share reclaim this long.
	MinRuntime Duration `json:"minRuntime"`
}

// Duration is a time.Duration written as "10m" in the file.
type Duration struct{ time.Duration }

// UnmarshalJSON reads "10m", "30s" or "0".
func (d *Duration) UnmarshalJSON(b []byte) error {
	s := string(b)
	if len(s) >= 2 && s[0] == '"' {
		s = s[1 : len(s)-1]
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return &badDuration{value: s}
	}
	d.Duration = v
	return nil
}

// badDuration is the error of a duration that does not parse; Load adds
// the key it was found under.
type badDuration struct{ value string }

func (e *badDuration) Error() string {
	return fmt.Sprintf("duration %q: want a value like 10m or 30s", e.value)
}

// keyOf returns the path ("usage.idle[0].timeout") of the first leaf of a
// decoded YAML tree that reads as value, or "".
func keyOf(tree any, value, at string) string {
	switch t := tree.(type) {
	case map[string]any:
		keys := make([]string, 0, len(t))
		for k := range t {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			next := k
			if at != "" {
				next = at + "." + k
			}
			if p := keyOf(t[k], value, next); p != "" {
				return p
			}
		}
	case []any:
		for i, v := range t {
			if p := keyOf(v, value, fmt.Sprintf("%s[%d]", at, i)); p != "" {
				return p
			}
		}
	default:
		b, err := json.Marshal(t)
		if err == nil && strings.Trim(string(b), `"`) == value {
			return at
		}
	}
	return ""
}

// MarshalJSON writes the duration as "10m0s".
func (d Duration) MarshalJSON() ([]byte, error) { return []byte(`"` + d.String() + `"`), nil }

// file is what a configuration file may hold; absent fields keep their
// defaults.
type file struct {
	Addr            *string         `json:"addr"`
	Data            *string         `json:"data"`
	Store           *string         `json:"store"`
	ServerName      *string         `json:"serverName"`
	AdvertiseAddr   *string         `json:"advertiseAddr"`
	LeaseTTL        *Duration       `json:"leaseTTL"`
	FakeGPUs        *string         `json:"fakeGPUs"`
	NodeName        *string         `json:"nodeName"`
	Executor        *string         `json:"executor"`
	Kubernetes      *Kubernetes     `json:"kubernetes"`
	Local           *Local          `json:"local"`
	PriorityClasses []PriorityClass `json:"priorityClasses"`
	Scheduler       *Scheduler      `json:"scheduler"`
	Limits          *fileLimits     `json:"limits"`
	Usage           *fileUsage      `json:"usage"`
	Pool            *string         `json:"pool"`
	SecretsKeyFile  *string         `json:"secretsKeyFile"`
	Cost            *Cost           `json:"cost"`
	Storage         *Storage        `json:"storage"`
	Proxy           *Proxy          `json:"proxy"`
	Clusters        []Cluster       `json:"clusters"`
	Pools           []Pool          `json:"pools"`
	Burst           *struct {
		After       *Duration `json:"after"`
		IdleRelease *Duration `json:"idleRelease"`
		Classes     []string  `json:"classes"`
	} `json:"burst"`
	Qualification *struct {
		OnRegistration *bool     `json:"onRegistration"`
		Level          *int      `json:"level"`
		Every          *Duration `json:"every"`
		RequireDCGM    *bool     `json:"requireDCGM"`
		Policy         *string   `json:"policy"`
	} `json:"qualification"`
}

// Load reads a YAML (or JSON) configuration file over the defaults.
// Unknown fields are errors.
func Load(path string) (Config, error) {
	c := Default()
	b, err := os.ReadFile(path)
	if err != nil {
		return c, fmt.Errorf("config: %w", err)
	}
	var f file
	if err := yaml.UnmarshalStrict(b, &f); err != nil {
		// The JSON decoder does not say where a value that failed its
		// own UnmarshalJSON was: find the key in the file.
		var bad *badDuration
		var tree any
		if errors.As(err, &bad) && yaml.Unmarshal(b, &tree) == nil {
			if at := keyOf(tree, bad.value, ""); at != "" {
				return c, fmt.Errorf("config %s: %s: %w", path, at, bad)
			}
		}
		return c, fmt.Errorf("config %s: %w", path, err)
	}
	if f.Addr != nil {
		c.Addr = *f.Addr
	}
	if f.Data != nil {
		c.DataDir = *f.Data
	}
	if f.Store != nil {
		c.Store = *f.Store
	}
	if f.ServerName != nil {
		c.ServerName = *f.ServerName
	}
	if f.AdvertiseAddr != nil {
		c.AdvertiseAddr = *f.AdvertiseAddr
	}
	if f.LeaseTTL != nil {
		c.LeaseTTL = f.LeaseTTL.Duration
	}
	if f.FakeGPUs != nil {
		c.FakeGPUs = *f.FakeGPUs
	}
	if f.NodeName != nil {
		c.NodeName = *f.NodeName
	}
	if f.Executor != nil {
		c.Executor = *f.Executor
	}
	if f.Kubernetes != nil {
		c.Kubernetes = *f.Kubernetes
	}
	if f.Local != nil {
		c.Local = *f.Local
	}
	if f.PriorityClasses != nil {
		c.PriorityClasses = f.PriorityClasses
	}
	if f.Scheduler != nil {
		c.Scheduler = *f.Scheduler
	}
	if l := f.Limits; l != nil {
		// Each limit left out keeps its default: leaving one out must not
		// lift it.
		set(&c.Limits.MaxPendingPerTeam, l.MaxPendingPerTeam)
		set(&c.Limits.MaxPendingPerUser, l.MaxPendingPerUser)
		set(&c.Limits.RequestsPerSecond, l.RequestsPerSecond)
		set(&c.Limits.Burst, l.Burst)
	}
	set(&c.Pool, f.Pool)
	set(&c.SecretsKeyFile, f.SecretsKeyFile)
	if q := f.Qualification; q != nil {
		set(&c.Qualification.OnRegistration, q.OnRegistration)
		set(&c.Qualification.Level, q.Level)
		set(&c.Qualification.Every, q.Every)
		set(&c.Qualification.RequireDCGM, q.RequireDCGM)
		set(&c.Qualification.Policy, q.Policy)
	}
	if f.Storage != nil {
		c.Storage = *f.Storage
	}
	if f.Proxy != nil {
		c.Proxy = *f.Proxy
	}
	c.ClusterList, c.PoolList = f.Clusters, f.Pools
	if b := f.Burst; b != nil {
		if b.After != nil {
			c.Burst.After = *b.After
		}
		if b.IdleRelease != nil {
			c.Burst.IdleRelease = *b.IdleRelease
		}
		if b.Classes != nil {
			c.Burst.Classes = b.Classes
		}
	}
	if f.Cost != nil {
		cur := c.Cost.Currency
		c.Cost = *f.Cost
		if c.Cost.Currency == "" {
			c.Cost.Currency = cur
		}
	}
	if u := f.Usage; u != nil {
		set(&c.Usage.SampleInterval, u.SampleInterval)
		set(&c.Usage.History, u.History)
		set(&c.Usage.NvidiaSMI, u.NvidiaSMI)
		set(&c.Usage.DCGMURL, u.DCGMURL)
		if u.Idle != nil {
			c.Usage.Idle = *u.Idle
		}
		if u.Memory != nil {
			set(&c.Usage.Memory.Enforce, u.Memory.Enforce)
			set(&c.Usage.Memory.GraceSamples, u.Memory.GraceSamples)
		}
	}
	return c, nil
}

// fileUsage is the usage section of the file; absent fields keep their
// defaults, and idle rules given replace the default ones ([] removes
// them all).
type fileUsage struct {
	SampleInterval *Duration   `json:"sampleInterval"`
	History        *Duration   `json:"history"`
	NvidiaSMI      *string     `json:"nvidiaSMI"`
	DCGMURL        *string     `json:"dcgmURL"`
	Idle           *[]IdleRule `json:"idle"`
	Memory         *struct {
		Enforce      *bool `json:"enforce"`
		GraceSamples *int  `json:"graceSamples"`
	} `json:"memory"`
}

// DefaultPriorityClasses mirror core.DefaultPriorityClasses.
func DefaultPriorityClasses() []PriorityClass {
	return []PriorityClass{
		{Name: "production", Value: 1000, Preemptible: false, MayBorrow: false},
		{Name: "training", Value: 500, Preemptible: true, MayBorrow: true},
		{Name: "development", Value: 300, Preemptible: true, MayBorrow: true},
		{Name: "batch", Value: 100, Preemptible: true, MayBorrow: true, IdleOnly: true},
	}
}

var className = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)

// validateClasses checks the priority classes: valid, distinct names and
// values, and idle-only classes that may borrow and be preempted. The
// defaults for kinds (training, development) must exist.
func validateClasses(cs []PriorityClass) error {
	var errs []error
	if len(cs) == 0 {
		return errors.New("priorityClasses: at least one class is needed")
	}
	names, values := map[string]bool{}, map[int]bool{}
	for i, c := range cs {
		at := fmt.Sprintf("priorityClasses[%d]", i)
		if len(c.Name) > 63 || !className.MatchString(c.Name) {
			errs = append(errs, fmt.Errorf("%s.name %q: lowercase letters, digits and '-'", at, c.Name))
		}
		if names[c.Name] {
			errs = append(errs, fmt.Errorf("%s.name %q: defined twice", at, c.Name))
		}
		if values[c.Value] {
			errs = append(errs, fmt.Errorf("%s.value %d: two classes have it; values order the classes", at, c.Value))
		}
		names[c.Name], values[c.Value] = true, true
		if c.IdleOnly && (!c.Preemptible || !c.MayBorrow) {
			errs = append(errs, fmt.Errorf("%s: an idleOnly class must be preemptible and mayBorrow", at))
		}
	}
	for _, need := range []string{"training", "development"} {
		if !names[need] {
			errs = append(errs, fmt.Errorf("priorityClasses: %q is needed (the default for jobs and notebooks)", need))
		}
	}
	return errors.Join(errs...)
}

func set[T any](dst *T, v *T) {
	if v != nil {
		*dst = *v
	}
}
