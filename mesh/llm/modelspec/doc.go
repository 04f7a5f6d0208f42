// Package modelspec names a model and how to call it: the [Model] a
// model name stands for ([ParseModel]: a provider and the name its API
// takes), the providers and the environment variables of their keys and
// base URLs ([KeyEnv], [BaseURLEnv]), the [Sampling] settings of a call,
// and the API [Keys], which never print.
//
// It is the vocabulary that package config fills from agent.yaml and the
// environment, and that mesh/llm and its providers take: a leaf that
// imports nothing of the module, so that config can name these types
// without depending on the model clients. It reads nothing, starts no
// goroutine and holds no state.
//
//	m, err := modelspec.ParseModel("claude-sonnet-4-5")
//	// m.Provider == modelspec.ProviderAnthropic, m.Name == "claude-sonnet-4-5"
//	// modelspec.KeyEnv(m.Provider) == "ANTHROPIC_API_KEY"
package modelspec
