// The translation unit that builds the tests' precompiled header
// (tests/CMakeLists.txt, tessera_test_pch); it holds no code of its own.
