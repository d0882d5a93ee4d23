package apiserver

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gpufleet/gpufleet/api"
	"github.com/gpufleet/gpufleet/internal/core/quantity"
)

// openAPIDoc parses api.OpenAPI, or fails the test.
func openAPIDoc(t *testing.T) map[string]any {
	t.Helper()
	var doc map[string]any
	if err := json.Unmarshal(api.OpenAPI, &doc); err != nil {
		t.Fatalf("api/openapi.json does not parse: %v", err)
	}
	return doc
}

// obj reads a JSON object at a path of keys, or nil when it is not there.
func obj(v any, keys ...string) map[string]any {
	for _, k := range keys {
		m, _ := v.(map[string]any)
		v = m[k]
	}
	m, _ := v.(map[string]any)
	return m
}

// resolve follows a local $ref ("#/components/...") until it reaches a value
// that is not a reference. ok is false for a reference that leads nowhere.
func resolve(doc map[string]any, v map[string]any) (map[string]any, bool) {
	for range 10 {
		ref, isRef := v["$ref"].(string)
		if !isRef {
			return v, true
		}
		p, ok := strings.CutPrefix(ref, "#/")
		if !ok {
			return nil, false
		}
		v = obj(doc, strings.Split(p, "/")...)
		if v == nil {
			return nil, false
		}
	}
	return nil, false
}

// splitRoute splits "GET /api/v1/workloads/{id}" into its method, lower case as
// in the document, and its path.
func splitRoute(r string) (method, path string) {
	m, p, _ := strings.Cut(r, " ")
	return strings.ToLower(m), p
}

// pathParams fills in the path parameters of a route with example values.
var pathParams = strings.NewReplacer("{id}", "wl-1", "{name}", "research", "{team}", "research", "{user}", "alice")

// publicRoutes are served without a token.
var publicRoutes = []string{"GET /healthz", "GET /readyz", "GET /api/v1/healthz", "GET /api/v1/readyz", "GET /api/v1/openapi.json"}

func TestOpenAPIIsAnOpenAPI3Document(t *testing.T) {
	doc := openAPIDoc(t)
	v, _ := doc["openapi"].(string)
	if !strings.HasPrefix(v, "3.") {
		t.Errorf("openapi = %q, want 3.x", v)
	}
	if obj(doc, "info") == nil || obj(doc, "paths") == nil || obj(doc, "components", "schemas") == nil {
		t.Errorf("document lacks info, paths or components.schemas")
	}
}

func TestOpenAPIDescribesEveryRoute(t *testing.T) {
	doc := openAPIDoc(t)
	paths := obj(doc, "paths")
	for _, r := range Routes {
		t.Run(r, func(t *testing.T) {
			method, path := splitRoute(r)
			if obj(paths, path, method) == nil {
				t.Errorf("paths[%q][%q] is missing", path, method)
			}
		})
	}
	t.Run("the document describes no route the server lacks", func(t *testing.T) {
		for path, item := range paths {
			for method := range item.(map[string]any) {
				if method == "parameters" || method == "summary" || method == "description" {
					continue
				}
				r := strings.ToUpper(method) + " " + path
				if !slices.Contains(Routes, r) {
					t.Errorf("the document describes %s, which is not in Routes", r)
				}
			}
		}
	})
}

func TestOpenAPIOperations(t *testing.T) {
	doc := openAPIDoc(t)
	ids := map[string]string{}
	for _, r := range Routes {
		t.Run(r, func(t *testing.T) {
			method, path := splitRoute(r)
			op := obj(doc, "paths", path, method)
			if op == nil {
				t.Skip("not described; TestOpenAPIDescribesEveryRoute says so")
			}
			if id, _ := op["operationId"].(string); id == "" {
				t.Errorf("no operationId")
			} else if other, dup := ids[id]; dup {
				t.Errorf("operationId %q is used by %s too", id, other)
			} else {
				ids[id] = r
			}

			// Every {param} of the path is a required path parameter.
			params := parameters(t, doc, path, method)
			for _, m := range regexp.MustCompile(`\{([^}]+)\}`).FindAllStringSubmatch(path, -1) {
				p := params["path "+m[1]]
				if p == nil || p["required"] != true {
					t.Errorf("path parameter %q is not declared as a required path parameter", m[1])
				}
			}

			// Every answer but a 204 has a body schema, and every error
			// answer is an api.ErrorBody.
			responses := obj(op, "responses")
			if len(responses) == 0 {
				t.Fatalf("no responses")
			}
			for status, v := range responses {
				resp, ok := resolve(doc, v.(map[string]any))
				if !ok {
					t.Errorf("response %s: $ref does not resolve", status)
					continue
				}
				content := obj(resp, "content")
				if status == "204" || status == "101" {
					if len(content) != 0 {
						t.Errorf("response %s has content", status)
					}
					continue
				}
				if len(content) == 0 {
					t.Errorf("response %s has no content", status)
				}
				if status >= "400" {
					if ref, _ := obj(content, "application/json", "schema")["$ref"].(string); ref != "#/components/schemas/ErrorBody" {
						t.Errorf("response %s: schema is %q, want the ErrorBody schema", status, ref)
					}
				}
			}
		})
	}
}

// parameters returns the parameters of an operation and of its path, keyed
// "in name" ("query limit", "header Idempotency-Key").
func parameters(t *testing.T, doc map[string]any, path, method string) map[string]map[string]any {
	t.Helper()
	out := map[string]map[string]any{}
	for _, where := range []map[string]any{obj(doc, "paths", path), obj(doc, "paths", path, method)} {
		list, _ := where["parameters"].([]any)
		for _, v := range list {
			p, ok := resolve(doc, v.(map[string]any))
			if !ok {
				t.Errorf("a parameter's $ref does not resolve")
				continue
			}
			out[p["in"].(string)+" "+p["name"].(string)] = p
		}
	}
	return out
}

func TestOpenAPIParametersAndAnswers(t *testing.T) {
	doc := openAPIDoc(t)
	tests := []struct {
		route    string
		params   []string // besides path parameters
		statuses []string
	}{
		{"GET /healthz", nil, []string{"200"}},
		{"GET /readyz", nil, []string{"200", "503"}},
		{"GET /api/v1/healthz", nil, []string{"200"}},
		{"GET /api/v1/readyz", nil, []string{"200", "503"}},
		{"GET /api/v1/openapi.json", nil, []string{"200"}},
		{"GET /api/v1/whoami", nil, []string{"200", "401", "429"}},
		{"POST /api/v1/workloads", []string{"header Idempotency-Key"}, []string{"200", "201", "400", "401", "403", "413", "422", "429"}},
		{"GET /api/v1/workloads", []string{"query limit", "query name", "query owner", "query pageToken", "query phase", "query team"}, []string{"200", "400", "401", "429"}},
		{"GET /api/v1/workloads/{id}", nil, []string{"200", "401", "404", "429"}},
		{"DELETE /api/v1/workloads/{id}", nil, []string{"200", "401", "403", "404", "429"}},
		{"GET /api/v1/workloads/{id}/logs", []string{"query follow", "query limitBytes", "query sinceSeconds", "query tailLines"}, []string{"200", "400", "401", "404", "429"}},
		{"GET /api/v1/workloads/{id}/events", nil, []string{"200", "401", "404", "429"}},
		{"GET /api/v1/workloads/{id}/attempts", nil, []string{"200", "401", "404", "429"}},
		{"GET /api/v1/workloads/{id}/usage", []string{"query window"}, []string{"200", "400", "401", "404", "429"}},
		{"GET /api/v1/workloads/{id}/portforward", []string{"query port"}, []string{"101", "400", "401", "403", "404", "429", "503"}},
		{"POST /api/v1/arrays", []string{"header Idempotency-Key"}, []string{"200", "201", "400", "401", "403", "413", "422", "429"}},
		{"GET /api/v1/arrays/{id}", nil, []string{"200", "401", "404", "429"}},
		{"DELETE /api/v1/arrays/{id}", nil, []string{"200", "401", "403", "404", "429"}},
		{"GET /api/v1/nodes", nil, []string{"200", "401", "429"}},
		{"GET /api/v1/priorityclasses", nil, []string{"200", "401", "429"}},
		{"GET /api/v1/teams", nil, []string{"200", "401", "429"}},
		{"POST /api/v1/teams", nil, []string{"201", "400", "401", "403", "409", "413", "429"}},
		{"PATCH /api/v1/teams/{name}", nil, []string{"200", "400", "401", "403", "404", "413", "429"}},
		{"DELETE /api/v1/teams/{name}", nil, []string{"204", "401", "403", "404", "409", "429"}},
		{"GET /api/v1/teams/{team}/members", []string{"query limit", "query pageToken"}, []string{"200", "400", "401", "404", "429"}},
		{"POST /api/v1/teams/{team}/secrets", nil, []string{"201", "400", "401", "403", "404", "409", "413", "429", "503"}},
		{"GET /api/v1/teams/{team}/secrets", nil, []string{"200", "401", "404", "429"}},
		{"DELETE /api/v1/teams/{team}/secrets/{name}", nil, []string{"204", "401", "403", "404", "429"}},
		{"POST /api/v1/teams/{team}/volumes", nil, []string{"201", "400", "401", "403", "404", "409", "413", "429"}},
		{"GET /api/v1/teams/{team}/volumes", nil, []string{"200", "401", "404", "429"}},
		{"DELETE /api/v1/teams/{team}/volumes/{name}", nil, []string{"204", "401", "403", "404", "409", "429"}},
		{"GET /api/v1/teams/{team}/storage", nil, []string{"200", "401", "404", "429"}},
		{"PUT /api/v1/teams/{team}/members/{user}", nil, []string{"200", "400", "401", "403", "404", "409", "413", "429"}},
		{"DELETE /api/v1/teams/{team}/members/{user}", nil, []string{"204", "401", "403", "404", "409", "429"}},
		{"POST /api/v1/users", nil, []string{"201", "400", "401", "403", "404", "409", "413", "422", "429"}},
		{"GET /api/v1/users", []string{"query limit", "query pageToken"}, []string{"200", "400", "401", "403", "429"}},
		{"GET /api/v1/users/{name}", nil, []string{"200", "401", "404", "429"}},
		{"DELETE /api/v1/users/{name}", nil, []string{"204", "401", "403", "404", "409", "429"}},
		{"POST /api/v1/tokens", nil, []string{"201", "400", "401", "403", "404", "413", "429"}},
		{"GET /api/v1/tokens", []string{"query limit", "query pageToken", "query user"}, []string{"200", "400", "401", "404", "429"}},
		{"DELETE /api/v1/tokens/{id}", nil, []string{"204", "401", "404", "429"}},
		{"GET /api/v1/audit", []string{"query limit", "query pageToken", "query since", "query user"}, []string{"200", "400", "401", "403", "429"}},
		{"GET /api/v1/usage", []string{"query window"}, []string{"200", "400", "401", "429"}},
		{"GET /metrics", nil, []string{"200", "401", "403", "429"}},
		{"GET /api/v1/prices", nil, []string{"200", "401", "429", "503"}},
		{"POST /api/v1/prices", nil, []string{"201", "400", "401", "403", "409", "413", "429", "503"}},
		{"GET /api/v1/cost", []string{"query by", "query from", "query since", "query to"}, []string{"200", "400", "401", "429", "503"}},
		{"GET /api/v1/cost/series", []string{"query by", "query from", "query since", "query step", "query to"}, []string{"200", "400", "401", "429", "503"}},
		{"GET /api/v1/cost/export", []string{"query format", "query from", "query granularity", "query since", "query to"}, []string{"200", "400", "401", "429", "503"}},
		{"POST /api/v1/cost/estimate", nil, []string{"200", "400", "401", "413", "429", "503"}},
		{"GET /api/v1/budgets", nil, []string{"200", "401", "429", "503"}},
		{"GET /api/v1/teams/{name}/budget", nil, []string{"200", "401", "404", "429", "503"}},
		{"PUT /api/v1/teams/{name}/budget", nil, []string{"200", "400", "401", "403", "404", "413", "429", "503"}},
		{"DELETE /api/v1/teams/{name}/budget", nil, []string{"204", "401", "403", "404", "429", "503"}},
		{"POST /api/v1/workloads/{id}/outputs", nil, []string{"200", "400", "401", "403", "404", "413", "429"}},
		{"GET /api/v1/nodes/{name}", nil, []string{"200", "401", "404", "429"}},
		{"GET /api/v1/nodes/{name}/events", nil, []string{"200", "401", "404", "429"}},
		{"GET /api/v1/nodes/{name}/evidence", nil, []string{"200", "401", "404", "429"}},
		{"POST /api/v1/nodes/{name}/cordon", nil, []string{"200", "401", "403", "404", "409", "429", "503"}},
		{"POST /api/v1/nodes/{name}/uncordon", nil, []string{"200", "401", "403", "404", "409", "429", "503"}},
		{"POST /api/v1/nodes/{name}/drain", nil, []string{"200", "400", "401", "403", "404", "409", "413", "429", "503"}},
		{"POST /api/v1/nodes/{name}/validate", nil, []string{"200", "400", "401", "403", "404", "409", "413", "429", "503"}},
		{"POST /api/v1/nodes/{name}/faults", nil, []string{"200", "400", "401", "403", "404", "413", "429", "503"}},
		{"POST /api/v1/plan", nil, []string{"200", "400", "401", "413", "429"}},
		{"GET /api/v1/clusters", nil, []string{"200", "401", "429"}},
		{"GET /api/v1/servers", nil, []string{"200", "401", "403", "429", "503"}},
		{"GET /api/v1/pools", nil, []string{"200", "401", "429"}},
		{"POST /api/v1/acceptance/runs", nil, []string{"201", "400", "401", "413", "429", "503"}},
		{"GET /api/v1/acceptance/runs", []string{"query limit", "query team"}, []string{"200", "400", "401", "429"}},
		{"GET /api/v1/acceptance/runs/{id}", nil, []string{"200", "401", "404", "429"}},
		{"GET /api/v1/acceptance/runs/{id}/report", nil, []string{"200", "401", "404", "429"}},
		{"POST /api/v1/acceptance/runs/{id}/decision", nil, []string{"200", "400", "401", "403", "404", "409", "413", "429"}},
	}
	var covered []string
	for _, tt := range tests {
		covered = append(covered, tt.route)
		t.Run(tt.route, func(t *testing.T) {
			method, path := splitRoute(tt.route)
			var params []string
			for k := range parameters(t, doc, path, method) {
				if !strings.HasPrefix(k, "path ") {
					params = append(params, k)
				}
			}
			slices.Sort(params)
			if diff := cmp.Diff(tt.params, params); diff != "" {
				t.Errorf("parameters (-want +got):\n%s", diff)
			}
			var statuses []string
			for s := range obj(doc, "paths", path, method, "responses") {
				statuses = append(statuses, s)
			}
			slices.Sort(statuses)
			if diff := cmp.Diff(tt.statuses, statuses); diff != "" {
				t.Errorf("answers (-want +got):\n%s", diff)
			}
		})
	}
	slices.Sort(covered)
	if diff := cmp.Diff(slices.Sorted(slices.Values(Routes)), covered); diff != "" {
		t.Errorf("this table and Routes differ (-Routes +table):\n%s", diff)
	}
}

// TestOpenAPIRequestBodies checks that each route that reads a body
// names the api type its handler decodes, that the body is required unless
// the handler reads it only when there is one, and that no other route has
// one.
func TestOpenAPIRequestBodies(t *testing.T) {
	doc := openAPIDoc(t)
	bodies := map[string]string{
		"POST /api/v1/workloads":                     "Workload",
		"POST /api/v1/arrays":                        "Workload",
		"POST /api/v1/teams":                         "Team",
		"PATCH /api/v1/teams/{name}":                 "TeamQuota",
		"POST /api/v1/users":                         "User",
		"PUT /api/v1/teams/{team}/members/{user}":    "Membership",
		"POST /api/v1/tokens":                        "Token",
		"POST /api/v1/prices":                        "Price",
		"POST /api/v1/teams/{team}/secrets":          "Secret",
		"POST /api/v1/teams/{team}/volumes":          "Volume",
		"PUT /api/v1/teams/{name}/budget":            "Budget",
		"POST /api/v1/workloads/{id}/outputs":        "Outputs",
		"POST /api/v1/nodes/{name}/drain":            "Drain",
		"POST /api/v1/nodes/{name}/validate":         "Validate",
		"POST /api/v1/nodes/{name}/faults":           "Fault",
		"POST /api/v1/plan":                          "WorkloadBrief",
		"POST /api/v1/cost/estimate":                 "EstimateRequest",
		"POST /api/v1/acceptance/runs":               "AcceptanceRunRequest",
		"POST /api/v1/acceptance/runs/{id}/decision": "Decision",
	}
	// optional are the routes whose handler reads a body only when the
	// request has one (ContentLength != 0).
	optional := []string{"POST /api/v1/nodes/{name}/drain", "POST /api/v1/nodes/{name}/validate"}
	for _, r := range Routes {
		t.Run(r, func(t *testing.T) {
			method, path := splitRoute(r)
			body := obj(doc, "paths", path, method, "requestBody")
			want, reads := bodies[r]
			if !reads {
				if body != nil {
					t.Errorf("has a request body; the server reads none")
				}
				return
			}
			if want := !slices.Contains(optional, r); body["required"] != want {
				t.Errorf("request body required = %v, want %t", body["required"], want)
			}
			ref, _ := obj(body, "content", "application/json", "schema")["$ref"].(string)
			if ref != "#/components/schemas/"+want {
				t.Errorf("request body schema is %q, want the %s schema", ref, want)
			}
		})
	}
}

func TestOpenAPISecurity(t *testing.T) {
	doc := openAPIDoc(t)
	scheme := obj(doc, "components", "securitySchemes", "bearerAuth")
	if scheme["type"] != "http" || scheme["scheme"] != "bearer" {
		t.Errorf("bearerAuth is %v, want an http bearer scheme", scheme)
	}
	global, _ := doc["security"].([]any)
	if len(global) != 1 || obj(global[0]) == nil || obj(global[0])["bearerAuth"] == nil {
		t.Errorf("global security is %v, want [{bearerAuth: []}]", doc["security"])
	}

	// The document and the server agree on which routes take a token.
	srv := New(Options{OpenAPI: api.OpenAPI})
	for _, r := range Routes {
		t.Run(r, func(t *testing.T) {
			method, path := splitRoute(r)
			op := obj(doc, "paths", path, method)
			sec, overridden := op["security"].([]any)
			public := overridden && len(sec) == 0
			if want := slices.Contains(publicRoutes, r); public != want {
				t.Errorf("public in the document = %t, want %t", public, want)
			}
			if overridden && len(sec) > 0 {
				t.Errorf("security is overridden with %v; only public routes override it (with [])", sec)
			}
			if public {
				return // the server needs a store to answer some of these
			}
			req := httptest.NewRequest(strings.ToUpper(method), pathParams.Replace(path), nil)
			rec := httptest.NewRecorder()
			srv.ServeHTTP(rec, req)
			if rec.Code != http.StatusUnauthorized {
				t.Errorf("without a token the server answers %d, want 401 as the document says", rec.Code)
			}
		})
	}
}

func TestOpenAPIDocumentIsServedWithoutAToken(t *testing.T) {
	srv := New(Options{OpenAPI: api.OpenAPI})
	rec := httptest.NewRecorder()
	srv.ServeHTTP(rec, httptest.NewRequest("GET", "/api/v1/openapi.json", nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("GET /api/v1/openapi.json answered %d, want 200", rec.Code)
	}
	if !json.Valid(rec.Body.Bytes()) || !slices.Equal(rec.Body.Bytes(), api.OpenAPI) {
		t.Errorf("the server does not serve api.OpenAPI as it is")
	}
}

func TestOpenAPIReferencesResolve(t *testing.T) {
	doc := openAPIDoc(t)
	var refs int
	var walk func(path string, v any)
	walk = func(path string, v any) {
		switch v := v.(type) {
		case map[string]any:
			if ref, ok := v["$ref"].(string); ok {
				refs++
				if !strings.HasPrefix(ref, "#/components/") {
					t.Errorf("%s: $ref %q is not a local component", path, ref)
				} else if _, ok := resolve(doc, v); !ok {
					t.Errorf("%s: $ref %q does not resolve", path, ref)
				}
			}
			for k, e := range v {
				walk(path+"/"+k, e)
			}
		case []any:
			for _, e := range v {
				walk(path+"[]", e)
			}
		}
	}
	walk("#", doc)
	if refs == 0 {
		t.Errorf("no $ref at all; the schemas are expected to be shared through components")
	}
}

// TestOpenAPISchemasMirrorTheWireTypes reads the json tags of the api types
// so that the document cannot drift from them: each schema has exactly the
// type's properties, each property has the JSON type the field encodes to,
// and a required property is one the encoder never omits.
func TestOpenAPISchemasMirrorTheWireTypes(t *testing.T) {
	doc := openAPIDoc(t)
	schemas := obj(doc, "components", "schemas")
	types := map[string]reflect.Type{
		"Workload":       reflect.TypeFor[api.Workload](),
		"Resources":      reflect.TypeFor[api.Resources](),
		"WorkloadStatus": reflect.TypeFor[api.WorkloadStatus](),
		"Placement":      reflect.TypeFor[api.Placement](),
		"Event":          reflect.TypeFor[api.Event](),
		"Node":           reflect.TypeFor[api.Node](),
		"GPU":            reflect.TypeFor[api.GPU](),
		"GPUAllocation":  reflect.TypeFor[api.GPUAllocation](),
		"PriorityClass":  reflect.TypeFor[api.PriorityClass](),
		"Team":           reflect.TypeFor[api.Team](),
		"TeamQuota":      reflect.TypeFor[api.TeamQuota](),
		"User":           reflect.TypeFor[api.User](),
		"Error":          reflect.TypeFor[api.Error](),
		"FieldError":     reflect.TypeFor[api.FieldError](),
		"ErrorBody":      reflect.TypeFor[api.ErrorBody](),
		"WorkloadList":   reflect.TypeFor[api.List[api.Workload]](),
		"EventList":      reflect.TypeFor[api.List[api.Event]](),
		"NodeList":       reflect.TypeFor[api.List[api.Node]](),
		"TeamList":       reflect.TypeFor[api.List[api.Team]](),
		"Membership":     reflect.TypeFor[api.Membership](),
		"Token":          reflect.TypeFor[api.Token](),
		"AuditEntry":     reflect.TypeFor[api.AuditEntry](),
		"UserList":       reflect.TypeFor[api.List[api.User]](),
		"TokenList":      reflect.TypeFor[api.List[api.Token]](),
		"AuditList":      reflect.TypeFor[api.List[api.AuditEntry]](),
		"WorkloadUsage":  reflect.TypeFor[api.WorkloadUsage](),
		"UsageHistory":   reflect.TypeFor[api.UsageHistory](),
		"UsagePoint":     reflect.TypeFor[api.UsagePoint](),
	}
	for n, t := range map[string]reflect.Type{
		"Price": reflect.TypeFor[api.Price](), "PriceList": reflect.TypeFor[api.PriceList](),
		"Budget": reflect.TypeFor[api.Budget](), "BudgetStatus": reflect.TypeFor[api.BudgetStatus](),
		"BudgetList": reflect.TypeFor[api.BudgetList](), "Outputs": reflect.TypeFor[api.Outputs](),
		"CostRow": reflect.TypeFor[api.CostRow](), "CostReport": reflect.TypeFor[api.CostReport](),
		"CostSeries": reflect.TypeFor[api.CostSeries](), "CostSeriesPoint": reflect.TypeFor[api.CostSeriesPoint](),
		"EstimateRequest": reflect.TypeFor[api.EstimateRequest](), "CostEstimate": reflect.TypeFor[api.CostEstimate](),
		"EstimateOption": reflect.TypeFor[api.EstimateOption](), "UnitOutputs": reflect.TypeFor[api.UnitOutputs](),
	} {
		types[n] = t
	}
	for n, t := range map[string]reflect.Type{
		"NodeEvent": reflect.TypeFor[api.NodeEvent](), "NodeEventList": reflect.TypeFor[api.List[api.NodeEvent]](),
		"Evidence": reflect.TypeFor[api.Evidence](), "EvidenceList": reflect.TypeFor[api.List[api.Evidence]](),
		"Drain": reflect.TypeFor[api.Drain](), "Validate": reflect.TypeFor[api.Validate](), "Fault": reflect.TypeFor[api.Fault](),
	} {
		types[n] = t
	}
	types["Port"] = reflect.TypeFor[api.Port]()
	types["Secret"] = reflect.TypeFor[api.Secret]()
	types["Volume"] = reflect.TypeFor[api.Volume]()
	types["VolumeList"] = reflect.TypeFor[api.List[api.Volume]]()
	types["StorageUsage"] = reflect.TypeFor[api.StorageUsage]()
	types["VolumeMount"] = reflect.TypeFor[api.VolumeMount]()
	types["Mount"] = reflect.TypeFor[api.Mount]()
	for n, t := range map[string]reflect.Type{
		"WorkloadBrief": reflect.TypeFor[api.WorkloadBrief](), "ModelSpec": reflect.TypeFor[api.ModelSpec](), "BriefTargets": reflect.TypeFor[api.BriefTargets](),
		"Plan": reflect.TypeFor[api.Plan](), "MemoryEstimate": reflect.TypeFor[api.MemoryEstimate](), "MemoryLine": reflect.TypeFor[api.MemoryLine](),
		"PlanCandidate": reflect.TypeFor[api.PlanCandidate](), "AcceptanceCard": reflect.TypeFor[api.AcceptanceCard](), "CardTarget": reflect.TypeFor[api.CardTarget](),
		"Stage": reflect.TypeFor[api.Stage](), "AcceptanceRun": reflect.TypeFor[api.AcceptanceRun](), "StageRun": reflect.TypeFor[api.StageRun](),
		"Metric": reflect.TypeFor[api.Metric](), "Sample": reflect.TypeFor[api.Sample](), "CriterionResult": reflect.TypeFor[api.CriterionResult](),
		"Decision": reflect.TypeFor[api.Decision](), "AcceptanceRunRequest": reflect.TypeFor[api.AcceptanceRunRequest](),
		"AcceptanceRunList": reflect.TypeFor[api.List[api.AcceptanceRun]](),
		"Cluster":           reflect.TypeFor[api.Cluster](), "Pool": reflect.TypeFor[api.Pool](),
		"Server": reflect.TypeFor[api.Server](), "ServerList": reflect.TypeFor[api.List[api.Server]](), "Readiness": reflect.TypeFor[api.Readiness](),
		"ClusterList": reflect.TypeFor[api.List[api.Cluster]](), "PoolList": reflect.TypeFor[api.List[api.Pool]](),
	} {
		types[n] = t
	}
	for n, t := range map[string]reflect.Type{
		"LoadSpec": reflect.TypeFor[api.LoadSpec](), "LoadStep": reflect.TypeFor[api.LoadStep](), "Disruption": reflect.TypeFor[api.Disruption](),
		"Network": reflect.TypeFor[api.Network](), "DataBoundary": reflect.TypeFor[api.DataBoundary](), "NodeValidation": reflect.TypeFor[api.NodeValidation](),
		"SpeedEstimate": reflect.TypeFor[api.SpeedEstimate](),
	} {
		types[n] = t
	}
	types["Native"] = reflect.TypeFor[api.Native]()
	types["NativeOwner"] = reflect.TypeFor[api.NativeOwner]()
	types["ArraySpec"] = reflect.TypeFor[api.ArraySpec]()
	types["Array"] = reflect.TypeFor[api.Array]()
	types["WorkloadUsageHistory"] = reflect.TypeFor[api.WorkloadUsageHistory]()
	types["WorkloadUsagePoint"] = reflect.TypeFor[api.WorkloadUsagePoint]()
	types["Attempt"] = reflect.TypeFor[api.Attempt]()
	types["AttemptList"] = reflect.TypeFor[api.AttemptList]()
	types["Efficiency"] = reflect.TypeFor[api.Efficiency]()
	// schemaName is the schema of a struct type that a property refers to.
	schemaName := func(rt reflect.Type) string {
		for name, t := range types {
			if t == rt {
				return name
			}
		}
		return "(no schema for " + rt.String() + ")"
	}
	for name, rt := range types {
		t.Run(name, func(t *testing.T) {
			s := obj(schemas, name)
			if s == nil {
				t.Fatalf("components.schemas.%s is missing", name)
			}
			if s["type"] != "object" {
				t.Errorf("type = %v, want object", s["type"])
			}
			props := obj(s, "properties")
			fields := jsonFields(rt)
			var want, got []string
			for f := range fields {
				want = append(want, f)
			}
			for p := range props {
				got = append(got, p)
			}
			slices.Sort(want)
			slices.Sort(got)
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("properties differ from the json tags of %s (-Go +document):\n%s", rt, diff)
			}
			for f, sf := range fields {
				p := obj(props, f)
				if p == nil {
					continue
				}
				checkProperty(t, doc, f, sf.Type, sf.omitted, p, schemaName)
			}
			required, _ := s["required"].([]any)
			for _, r := range required {
				f, ok := fields[r.(string)]
				if !ok {
					t.Errorf("required property %q is not a field", r)
				} else if f.omitted {
					t.Errorf("required property %q is omitempty or omitzero, so answers may lack it", r)
				}
			}
		})
	}
}

type jsonField struct {
	reflect.StructField
	omitted bool // omitempty or omitzero
}

// jsonFields maps the JSON names of a struct's fields to the fields, as
// encoding/json names them.
func jsonFields(rt reflect.Type) map[string]jsonField {
	out := map[string]jsonField{}
	for i := range rt.NumField() {
		sf := rt.Field(i)
		if !sf.IsExported() {
			continue
		}
		tag := sf.Tag.Get("json")
		if tag == "-" {
			continue
		}
		if sf.Anonymous && tag == "" && sf.Type.Kind() == reflect.Struct {
			for k, v := range jsonFields(sf.Type) {
				if _, shadowed := out[k]; !shadowed {
					out[k] = v
				}
			}
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if name == "" {
			name = sf.Name
		}
		o := strings.Split(opts, ",")
		out[name] = jsonField{sf, slices.Contains(o, "omitempty") || slices.Contains(o, "omitzero")}
	}
	return out
}

var (
	timeType  = reflect.TypeFor[time.Time]()
	milliType = reflect.TypeFor[quantity.Milli]()
	moneyType = reflect.TypeFor[quantity.Money]()
	rawType   = reflect.TypeFor[json.RawMessage]()
)

// checkProperty checks that the schema p describes what encoding/json makes
// of a value of type rt.
func checkProperty(t *testing.T, doc map[string]any, field string, rt reflect.Type, omitted bool, p map[string]any, schemaName func(reflect.Type) string) {
	t.Helper()
	if rt.Kind() == reflect.Pointer {
		// A nil pointer is null unless the field is omitted when empty.
		if !omitted && p["nullable"] != true {
			t.Errorf("%s: a %s that is never omitted can be null; want nullable: true", field, rt)
		}
		rt = rt.Elem()
	}
	// A reference, possibly wrapped in allOf to carry readOnly.
	ref, _ := p["$ref"].(string)
	if all, ok := p["allOf"].([]any); ok && len(all) == 1 {
		ref, _ = obj(all[0])["$ref"].(string)
	}
	typ, _ := p["type"].(string)
	switch {
	case rt == timeType:
		if typ != "string" || p["format"] != "date-time" {
			t.Errorf("%s: type %q format %v, want a date-time string", field, typ, p["format"])
		}
	case rt == milliType:
		if typ != "number" {
			t.Errorf("%s: type %q, want number (a Milli quantity)", field, typ)
		}
	case rt == rawType:
		// Any JSON value: a schema without a type, saying what it holds.
		if typ != "" || p["description"] == nil {
			t.Errorf("%s: type %q, want any JSON value (no type) with a description", field, typ)
		}
	case rt == moneyType:
		if typ != "number" {
			t.Errorf("%s: type %q, want number (Money)", field, typ)
		}
		if d, _ := p["description"].(string); !strings.HasPrefix(d, "currency units, up to 6 decimals") {
			t.Errorf("%s: description %q", field, d)
		}
	case rt.Kind() == reflect.String:
		if typ != "string" {
			t.Errorf("%s: type %q, want string", field, typ)
		}
	case rt.Kind() == reflect.Bool:
		if typ != "boolean" {
			t.Errorf("%s: type %q, want boolean", field, typ)
		}
	case rt.Kind() >= reflect.Int && rt.Kind() <= reflect.Int64:
		if typ != "integer" {
			t.Errorf("%s: type %q, want integer", field, typ)
		}
	case rt.Kind() == reflect.Float64 || rt.Kind() == reflect.Float32:
		if typ != "number" {
			t.Errorf("%s: type %q, want number", field, typ)
		}
	case rt.Kind() == reflect.Slice:
		if typ != "array" {
			t.Errorf("%s: type %q, want array", field, typ)
			return
		}
		items := obj(p, "items")
		if items == nil {
			t.Errorf("%s: array without items", field)
			return
		}
		checkProperty(t, doc, field+"[]", rt.Elem(), true, items, schemaName)
	case rt.Kind() == reflect.Map:
		if typ != "object" {
			t.Errorf("%s: type %q, want object", field, typ)
			return
		}
		ap := obj(p, "additionalProperties")
		if ap == nil {
			t.Errorf("%s: a map without additionalProperties", field)
			return
		}
		checkProperty(t, doc, field+"{}", rt.Elem(), true, ap, schemaName)
	case rt.Kind() == reflect.Struct:
		if want := "#/components/schemas/" + schemaName(rt); ref != want {
			t.Errorf("%s: refers to %q, want %q", field, ref, want)
		}
	default:
		t.Errorf("%s: the test does not know how %s encodes", field, rt)
	}
}
