"""What tests share besides fixtures: paths, fakes, references and harnesses."""
