"""What the user calls: the Hyperspace facade, explain and whyNot, and the result tables it
returns (the only place values become DataFrames)."""
