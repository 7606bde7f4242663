"""The framework-neutral math the op tables build on: special functions, orthogonal polynomials,
the incomplete gamma and beta functions, small dense linear algebra, LDL and Jacobi decompositions,
complex values as (real, imaginary) pairs, all written in ONNX ops."""
