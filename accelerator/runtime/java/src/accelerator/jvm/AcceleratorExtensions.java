package accelerator.jvm;

import org.apache.spark.sql.SparkSessionExtensions;

/**
 * For {@code spark.sql.extensions}: injects the accelerator rule when a session is built.
 * The rule stays inert until Python registers its rewriter and sets spark.accelerator.enabled.
 */
public final class AcceleratorExtensions
    extends scala.runtime.AbstractFunction1<SparkSessionExtensions, scala.runtime.BoxedUnit> {

  @Override
  public scala.runtime.BoxedUnit apply(SparkSessionExtensions extensions) {
    extensions.injectPreCBORule(new AcceleratorRuleBuilder());
    return scala.runtime.BoxedUnit.UNIT;
  }
}
