package rules

import "testing"

func TestSucceeded(t *testing.T) {
	tests := []struct {
		ep     Endpoint
		status int
		want   bool
	}{
		{Provision, 200, true},
		{Provision, 201, true},
		{Provision, 409, false},
		{Provision, 410, false},
		{Update, 200, true},
		{Update, 201, false},
		{Deprovision, 200, true},
		{Deprovision, 410, true},
		{Deprovision, 500, false},
		{Bind, 201, true},
		{Bind, 422, false},
		{Unbind, 410, true},
		{Unbind, 400, false},
		{GetInstance, 200, false},
		{Endpoint(200), 200, false},
	}
	for _, tt := range tests {
		if got := Succeeded(Call{Endpoint: tt.ep}, tt.status); got != tt.want {
			t.Errorf("Succeeded(%s, %d) = %v, want %v", tt.ep, tt.status, got, tt.want)
		}
	}
}
